#!/usr/bin/env python3
"""Prints the top of a pprof profile (gzipped protobuf, as /debug/pprof/heap and
/debug/pprof/profile serve them). A heap profile: in-use bytes, attributed to the first frame
outside the allocator, profiler and std plumbing. A CPU profile: seconds on CPU, attributed the
same way (self time of the innermost named frame), then cumulative seconds of the functions of
this workspace's crates (each counted once per stack). No dependencies: the profile.proto fields
it needs are decoded by hand.

usage: pprof_top.py heap.pb.gz|cpu.pb.gz [N]
"""
import gzip
import sys
from collections import Counter


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def ints(wt, v):
    """A repeated int64 field: packed (wire type 2) or one value."""
    if wt != 2:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


# Frames that are the allocator, the profiler or generic containers, not the owner of the bytes.
PLUMBING = ("alloc::", "core::", "std::", "hashbrown::", "_rjem", "je_", "tikv_jemalloc", "prof_",
            "<tikv_jemallocator::", "__rustc::", "indexmap::", "<indexmap::", "parking_lot::",
            "jemalloc", "malloc", "realloc", "calloc", "__rust", "<alloc::", "<core::", "<std::",
            "<hashbrown::", "bytes::", "<bytes::", "serde::", "<serde", "serde_json::", "smallvec::")


# This workspace's crates, for the cumulative CPU top.
WORKSPACE = ("cloud_controllers", "controller_manager", "fake_cloud", "cloud_controller_manager")


# Crates whose frames name an owner.
OWNERS = ("cloud_controllers", "controller_manager", "fake_cloud", "kube_testenv", "kube_runtime",
          "kube_client", "kube_core", "tokio::", "hyper", "h2::", "tracing_subscriber", "rustls")


def main():
    data = gzip.decompress(open(sys.argv[1], "rb").read())
    top_n = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    strings, samples, locations, functions, sample_types = [], [], {}, {}, []
    for num, wt, v in fields(data):
        if num == 1:
            sample_types.append(dict((n, x) for n, _, x in fields(v)))
        elif num == 2:
            locs, vals = [], []
            for n, w, x in fields(v):
                if n == 1:
                    locs += ints(w, x)
                elif n == 2:
                    vals += ints(w, x)
            samples.append((locs, vals))
        elif num == 4:
            loc_id, funcs = 0, []
            for n, w, x in fields(v):
                if n == 1:
                    loc_id = x
                elif n == 4:
                    for ln, lw, lx in fields(x):
                        if ln == 1:
                            funcs.append(lx)
            locations[loc_id] = funcs
        elif num == 5:
            fid = name = 0
            for n, w, x in fields(v):
                if n == 1:
                    fid = x
                elif n == 2:
                    name = x
            functions[fid] = name
        elif num == 6:
            strings.append(v.decode("utf-8", "replace"))
    kinds = [strings[t.get(1, 0)] for t in sample_types]
    heap = "space" in kinds
    if heap:
        col, scale, unit = kinds.index("space"), 1e6, "MB"
    elif "cpu" in kinds:
        col, scale, unit = kinds.index("cpu"), 1e9, "s"  # nanoseconds
    else:
        col, scale, unit = len(kinds) - 1, 1, "samples"
    total, by_owner, cumulative = 0, Counter(), Counter()
    for locs, vals in samples:
        size = vals[col]
        total += size
        frames = [strings[functions.get(f, 0)] for loc in locs for f in locations.get(loc, [])]
        # The first frame of a named crate owns the bytes or the time (the caller that asked for
        # them); a stack with none is owned by its first frame outside the plumbing.
        owner = next((n for n in frames if n.lstrip("<").startswith(OWNERS)), None) or next(
            (n for n in frames if "::" in n and not n.startswith(PLUMBING)), "?")
        by_owner[owner] += size
        for name in set(n for n in frames if n.lstrip("<").startswith(WORKSPACE)):
            cumulative[name] += size
    print(f"sample types: {kinds}; total {col=} {total / scale:.1f} {unit} in {len(samples)} stacks")
    for owner, size in by_owner.most_common(top_n):
        print(f"{size / scale:8.2f} {unit} {100 * size / max(total, 1):5.1f}%  {owner[:150]}")
    if not heap:
        print("cumulative, this workspace's functions:")
        for name, size in cumulative.most_common(top_n):
            print(f"{size / scale:8.2f} {unit} {100 * size / max(total, 1):5.1f}%  {name[:150]}")


if __name__ == "__main__":
    main()
