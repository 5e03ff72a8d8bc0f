#!/usr/bin/env bash
# docs/benchmarks.md §6: what /debug/pprof costs the binary in memory. Starts the stock binary in
# --dev (its embedded API server and fake cloud in the same process; the admin port serves plain
# HTTP with no authentication), waits SETTLE seconds, then takes one after another a 1 s CPU
# profile, a LONG s CPU profile, a heap profile, and a LONG s CPU profile with a heap profile
# taken 2 s into it. For each it prints VmRSS just before (idle), its peak while the profile runs
# (read every 50 ms), and VmRSS AFTER seconds after the answer (jemalloc purges freed pages
# after about 10 s). Needs curl; builds nothing itself:
#   cargo build -p cloud-controller-manager     # or --release with PROFILE=release
#   bin/bench/profile-rss.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE=${PROFILE:-debug}
BIN=${BIN:-target/$PROFILE/cloud-controller-manager}
PORT=${PORT:-10300} SETTLE=${SETTLE:-30} AFTER=${AFTER:-20} LONG=${LONG:-30}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT

"$BIN" --dev --secure-port="$PORT" --dev-kubeconfig="$dir/kubeconfig" >"$dir/log" 2>&1 &
pid=$!
sleep "$SETTLE"

rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
mb() { awk -v kb="$1" 'BEGIN { printf "%.1f", kb / 1024 }'; }
get() {
    local code
    code=$(curl -s -o "$dir/$1.out" -w '%{http_code}' "http://127.0.0.1:$PORT/debug/pprof/$2")
    echo "$1: HTTP $code, $(wc -c <"$dir/$1.out") bytes" >>"$dir/answers"
}
# Runs "$@" in the background and prints the peak VmRSS (kB) until it is done.
peak_while() {
    local peak=0 r job
    "$@" &
    job=$!
    while kill -0 "$job" 2>/dev/null; do
        r=$(rss)
        if ((r > peak)); then peak=$r; fi
        sleep 0.05
    done
    wait "$job"
    echo "$peak"
}
together() {
    get cpu-with-heap "profile?seconds=$LONG" &
    sleep 2
    get heap-during-cpu heap
    wait
}
measure() {
    local name=$1 idle peak after
    shift
    idle=$(rss)
    peak=$(peak_while "$@")
    sleep "$AFTER"
    after=$(rss)
    printf '| %s | %s | %s (+%s) | %s (%+.1f) |\n' "$name" "$(mb "$idle")" "$(mb "$peak")" \
        "$(mb $((peak - idle)))" "$(mb "$after")" "$(mb $((after - idle)))"
}

echo "| profile | VmRSS idle MB | peak during MB (over idle) | VmRSS ${AFTER} s after MB (over idle) |"
echo "|---|---|---|---|"
measure "CPU, 1 s" get cpu-1s "profile?seconds=1"
measure "CPU, $LONG s" get "cpu-${LONG}s" "profile?seconds=$LONG"
measure "heap" get heap heap
measure "CPU $LONG s + heap at 2 s" together
grep -E 'VmHWM' "/proc/$pid/status"
cat "$dir/answers"
