"""Reads Rust source the way the house checks need it: code without comments, strings or test items.

Shared by `.ci/module-cycles` (the import graph between files) and `.ci/long-files` (file
lengths), and exercised by `.ci/test_module_cycles.py`. It is a text reader, not a compiler: it
knows comments (nested block comments too), string, raw string, byte string and char literals,
lifetimes, `#[cfg(test)]` items (a `mod tests { .. }` body, a `mod tests;` declaration with or
without `#[path]`, a test-only `use` or `fn`), inline `mod x { .. }` blocks, and `use` trees with
groups, `self`, globs and `as` renames.
"""

import os
import re

SKIP_DIRS = {"target", ".git", "node_modules"}
CHAR_RE = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]+\}|.)|[^\\'\n])'")
RAW_STR_RE = re.compile(r'(?:b|c)?r(#*)"')
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def workspace_members(repo):
    """The `members` of the workspace's Cargo.toml, as directories relative to `repo`."""
    try:
        with open(os.path.join(repo, "Cargo.toml"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    m = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.S | re.M)
    return re.findall(r'"([^"]+)"', m.group(1)) if m else []


def strip(text):
    """Comments become spaces and literals become `"<n>"`; returns (code, literal contents).

    Newlines are kept so offsets still fall on the same line; the literals list lets a caller
    read a `#[path = "..."]` value back.
    """
    out, lits = [], []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        prev = text[i - 1] if i else " "
        if c in "rbc" and not (prev.isalnum() or prev == "_"):
            m = RAW_STR_RE.match(text, i)
            if m:
                end = text.find('"' + m.group(1), m.end())
                end = n if end < 0 else end
                lits.append(text[m.end() : end])
                out.append(f'"{len(lits) - 1}"')
                i = end + 1 + len(m.group(1))
                continue
            if c in "bc" and text.startswith('"', i + 1):
                out.append(c)
                i += 1
                continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            lits.append(text[i + 1 : j])
            out.append(f'"{len(lits) - 1}"')
            i = j + 1
            continue
        if c == "'":
            m = CHAR_RE.match(text, i)
            if m:
                out.append("' '")
                i = m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out), lits


def skip_item(code, i):
    """End of the item or statement that starts at `i` (after its attributes)."""
    n = len(code)
    depth = angle = 0  # angle counts generics, so `fn f<A, B>` is not ended by its comma
    is_use = re.match(r"(?:pub(?:\s*\([^)]*\))?\s+)?use\b", code[i:]) is not None
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "<":
            angle += 1
        elif c == ">" and code[i - 1] not in "-=":
            angle = max(angle - 1, 0)
        elif depth == 0 and c == ";":
            return i + 1
        elif depth == 0 and angle == 0 and c == "," and not is_use:
            return i + 1
        elif depth == 0 and c == "}":
            return i  # the enclosing block ends: the item was its last member
        elif depth == 0 and c == "{" and not is_use:
            return match_brace(code, i) + 1
        i += 1
    return n


def match_brace(code, i):
    """Index of the `}` closing the `{` at `i`."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def skip_attrs(code, i):
    """Skips whitespace and outer attributes from `i`; returns (position, attribute texts)."""
    attrs = []
    while True:
        while i < len(code) and code[i].isspace():
            i += 1
        if not code.startswith("#[", i):
            return i, attrs
        depth, j = 0, i + 1
        while j < len(code):
            depth += code[j] == "["
            depth -= code[j] == "]"
            j += 1
            if depth == 0:
                break
        attrs.append(code[i:j])
        i = j


TEST_ATTR = re.compile(r"#\[cfg\(test\)\]")
MOD_DECL = re.compile(r"(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+([A-Za-z_]\w*)\s*([;{])")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"(\d+)"\]')


def drop_tests(code, lits):
    """Blanks `#[cfg(test)]` items; returns (code, test module declarations).

    A declaration is (name, path attribute or None) for each `#[cfg(test)] mod name;`, so the
    caller can tell which files are test-only.
    """
    decls = []
    out, last = [], 0
    for m in TEST_ATTR.finditer(code):
        if m.start() < last:
            continue  # inside an item already dropped
        start, attrs = skip_attrs(code, m.end())
        path = None
        for a in attrs:
            p = PATH_ATTR.match(a)
            if p:
                path = lits[int(p.group(1))]
        decl = MOD_DECL.match(code, start)
        if decl and decl.group(2) == ";":
            decls.append((decl.group(1), path))
        end = skip_item(code, start)
        out.append(code[last : m.start()])
        out.append(re.sub(r"[^\n]", " ", code[m.start() : end]))
        last = end
    out.append(code[last:])
    return "".join(out), decls


def inline_modules(code):
    """Splits `mod x { .. }` blocks out; returns [(module path below this file, code)]."""
    scopes = []

    def walk(text, here):
        parts, last = [], 0
        for m in MOD_DECL.finditer(text):
            if m.start() < last or m.group(2) != "{":
                continue
            if m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_"):
                continue
            open_at = m.end() - 1
            close = match_brace(text, open_at)
            walk(text[open_at + 1 : close], here + (m.group(1),))
            parts.append(text[last : m.start()])
            last = close + 1
        parts.append(text[last:])
        scopes.append((here, "".join(parts)))

    walk(code, ())
    return scopes


# group 1: the visibility of a re-export (`pub`, `pub(crate)`, ..), group 2: the use tree
USE_RE = re.compile(r"(?<![A-Za-z0-9_#])(pub\s*(?:\([^)]*\))?\s+)?use\s+([^;]*);")
TOKEN_RE = re.compile(r"::|[{},*]|\$?[A-Za-z_][A-Za-z0-9_]*")
GLOB = object()


def use_leaves(tree):
    """`a::{b as c, d::{self, *}}` -> [(["a","b"], "c"), (["a","d"], "d"), (["a","d"], GLOB)].

    Each leaf is (segments, the name it binds) where the name is GLOB for `*` and None for
    `as _`; a tree that starts with `::` names another crate and gives no leaves.
    """
    toks = TOKEN_RE.findall(tree)
    pos = 0
    if toks and toks[0] == "::":
        return []

    def tree_at(prefix):
        nonlocal pos
        if pos >= len(toks):
            return []
        tok = toks[pos]
        if tok == "{":
            pos += 1
            out = []
            while pos < len(toks) and toks[pos] != "}":
                out += tree_at(prefix)
                if pos < len(toks) and toks[pos] == ",":
                    pos += 1
            pos += 1
            return out
        if tok == "*":
            pos += 1
            return [(prefix, GLOB)]
        if tok in ",}":
            return []
        pos += 1
        segs = prefix + [tok]
        if pos < len(toks) and toks[pos] == "::":
            pos += 1
            return tree_at(segs)
        bound = tok
        if tok == "self":
            segs, bound = prefix, prefix[-1] if prefix else None
        if pos + 1 < len(toks) and toks[pos] == "as":
            bound = None if toks[pos + 1] == "_" else toks[pos + 1]
            pos += 2
        return [(segs, bound)]

    return tree_at([])


def rust_files(repo):
    """Every `.rs` file under the repository, as paths relative to it (build output skipped)."""
    out = []
    for dirpath, dirs, names in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".rs"):
                out.append(os.path.relpath(os.path.join(dirpath, name), repo))
    return out


def test_only_files(repo):
    """Files that only a `#[cfg(test)] mod x;` declaration (or `#![cfg(test)]`) brings in."""
    found = set()
    for rel in rust_files(repo):
        path = os.path.join(repo, rel)
        try:
            with open(path, encoding="utf-8") as f:
                code, lits = strip(f.read())
        except (OSError, UnicodeDecodeError):
            continue
        if re.match(r"\s*#!\[cfg\(test\)\]", code):
            found.add(os.path.normpath(rel))
        _, decls = drop_tests(code, lits)
        for name, attr in decls:
            for cand in declared_paths(rel, name, attr):
                if os.path.isfile(os.path.join(repo, cand)):
                    found.add(os.path.normpath(cand))
    return found


def declared_paths(rel, name, attr):
    """Where `mod name;` (with an optional `#[path]`) in file `rel` may live."""
    here = os.path.dirname(rel)
    if attr is not None:
        return [os.path.join(here, attr)]
    base = os.path.basename(rel)
    if base not in ("mod.rs", "lib.rs", "main.rs"):
        here = os.path.join(here, base[:-3])
    return [os.path.join(here, name + ".rs"), os.path.join(here, name, "mod.rs")]
