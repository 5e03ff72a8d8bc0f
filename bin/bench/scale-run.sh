#!/usr/bin/env bash
# The scale run of docs/benchmarks.md §8: the stock binary (cloud-node + service, fake cloud,
# leader election off) against a standalone kube-testenv; NODES kubelet-shaped Nodes join over
# JOIN_SECONDS (RATE per second; a real server's client QPS lets 3,000 Nodes in over 300 s) under
# SERVICES LoadBalancer Services. Prints the binary's CPU seconds over the join, its
# UpdateLoadBalancer calls (in all and per load balancer, from the fake cloud's call log), its
# peak and final RSS (VmHWM / VmRSS), its events written against its successful
# UpdateLoadBalancer calls, its dropped events, the top of a CPU profile of PROFILE_SECONDS taken
# from PROFILE_AT seconds into the join (/debug/pprof/profile) and of a heap profile taken at the
# end (/debug/pprof/heap), both decoded by pprof_top.py, and how long the binary took to exit
# after SIGTERM. PROFILE_SECONDS=0 takes no CPU profile (the profiler's buffers add to RSS).
# Needs kubectl, curl and python3; builds nothing itself:
#   cargo build --release -p cloud-controller-manager -p kube-testenv
#   bin/bench/scale-run.sh            # NODES=3000 SERVICES=1000 JOIN_SECONDS=300 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
NODES=${NODES:-3000} SERVICES=${SERVICES:-1000} JOIN_SECONDS=${JOIN_SECONDS:-300}
RATE=${RATE:-$(python3 -c "print($NODES / $JOIN_SECONDS)")}
PROFILE_AT=${PROFILE_AT:-60} PROFILE_SECONDS=${PROFILE_SECONDS:-60}
PROFILE=${PROFILE:-release}
BIN=${BIN:-target/$PROFILE/cloud-controller-manager}
TESTENV=${TESTENV:-target/$PROFILE/kube-testenv}
PORT=${PORT:-16443} ADMIN=${ADMIN:-10358}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT
export KUBECONFIG=$dir/kubeconfig

"$TESTENV" --port "$PORT" --kubeconfig "$KUBECONFIG" --history-window 100000 >"$dir/testenv.log" 2>&1 &
until kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.2; done

cat >"$dir/cloud.yaml" <<YAML
adoptUnknownNodes: true
loadBalancerPool: {cidr: 10.200.0.0/16}
callLogFile: $dir/calls.jsonl
YAML
python3 - "$dir" "$NODES" "$SERVICES" <<'PY'
import json, sys
d, nodes, services = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
svc = [{"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"lb-{i:04}", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "selector": {"app": f"lb-{i:04}"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}}
       for i in range(services)]
json.dump({"apiVersion": "v1", "kind": "List", "items": svc}, open(f"{d}/services.json", "w"))
taint = [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]
for b in range(0, nodes, 10):
    items = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"node-{i:05}", "labels": {"kubernetes.io/hostname": f"node-{i:05}"}},
              "spec": {"taints": taint}} for i in range(b, min(b + 10, nodes))]
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(f"{d}/nodes-{b // 10:04}.json", "w"))
PY

"$BIN" --kubeconfig="$KUBECONFIG" --cloud-provider=fake --cloud-config="$dir/cloud.yaml" \
  --controllers=cloud-node,service --leader-elect=false --configure-cloud-routes=false \
  --secure-port="$ADMIN" --cert-dir="$dir/certs" \
  --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" \
  >"$dir/ccm.log" 2>&1 &
ccm=$!
metric() { curl -sk "https://127.0.0.1:$ADMIN/metrics" | awk -v m="$1" '$0 ~ "^"m {s += $NF} END {print s + 0}'; }
until curl -sk "https://127.0.0.1:$ADMIN/readyz" >/dev/null 2>&1; do sleep 0.2; done

kubectl create -f "$dir/services.json" >/dev/null
provisioned() { kubectl get svc -n default -o jsonpath='{range .items[*]}{.status.loadBalancer.ingress[0].ip}{"\n"}{end}' | grep -c . || true; }
until [ "$(provisioned)" -ge "$SERVICES" ]; do sleep 1; done
echo "provisioned $SERVICES load balancers; RSS now $(grep VmRSS /proc/$ccm/status | awk '{print $2/1024}') MB"

# SIGTERM_AT=<seconds into the join>: send SIGTERM then instead, print how long the exit took, stop.
if [ -n "${SIGTERM_AT:-}" ]; then
  (sleep "$SIGTERM_AT"; sent=$(date +%s.%N); kill "$ccm"; while kill -0 "$ccm" 2>/dev/null; do sleep 0.1; done
   echo "SIGTERM at ${SIGTERM_AT} s into the join: exited $(python3 -c "print(round($(date +%s.%N) - $sent, 1))") s after it"
   tail -5 "$dir/ccm.log"; kill $$) &
  trap 'exit 0' TERM
fi
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$ccm/stat"; }
: >"$dir/calls.jsonl"
cpu0=$(cpu)
start=$(date +%s.%N)
[ "$PROFILE_SECONDS" -gt 0 ] && (sleep "$PROFILE_AT"; curl -sk "https://127.0.0.1:$ADMIN/debug/pprof/profile?seconds=$PROFILE_SECONDS" -o "$dir/cpu.pb.gz") &
# Batches of 10 at RATE Nodes per second, each create on time whatever the last one took.
per=$(python3 -c "print(10 / $RATE)")
for f in "$dir"/nodes-*.json; do kubectl create -f "$f" >/dev/null & sleep "$per"; done
wait_nodes() {
  kubectl get nodes -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(1 for n in items if n["spec"].get("providerID") and not any(
    t["key"] == "node.cloudprovider.kubernetes.io/uninitialized" for t in n["spec"].get("taints") or [])))'
}
until [ "$(wait_nodes)" -ge "$NODES" ]; do sleep 1; done
initialized=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
# Converged once no UpdateLoadBalancer was made for 10 s.
last=-1; same=0
while [ $same -lt 10 ]; do
  now=$(metric 'cloud_provider_requests_total[{].*method="UpdateLoadBalancer",outcome="success"')
  if [ "$now" = "$last" ]; then same=$((same + 1)); else same=0; last=$now; fi
  sleep 1
done
converged=$(python3 -c "print(round($(date +%s.%N) - $start - 10, 1))")
cpu1=$(cpu)
# The event writer may still be behind the calls: count until the sum holds for 3 s (at most 60 s).
count_events() {
  kubectl get events -n default -o json | python3 -c '
import json, sys
print(sum(e.get("count") or 1 for e in json.load(sys.stdin)["items"] if e.get("reason") == "UpdatedLoadBalancer"))'
}
events=-1; same=0; waited=0
while [ $same -lt 3 ] && [ $waited -lt 60 ]; do
  now=$(count_events)
  if [ "$now" = "$events" ]; then same=$((same + 1)); else same=0; events=$now; fi
  sleep 1; waited=$((waited + 1))
done
echo "nodes initialized after ${initialized} s; load balancers quiet after ${converged} s"
echo "UpdateLoadBalancer requests (successful, from /metrics): $last; UpdatedLoadBalancer events (count sum): $events"
echo "events dropped: $(metric 'events_dropped_total')"
echo "CPU over the join until quiet: $(python3 -c "print(round($cpu1 - $cpu0, 1))") s"
python3 - "$dir/calls.jsonl" "$SERVICES" <<'PY'
import collections, json, sys
per = collections.Counter()
for line in open(sys.argv[1]):
    c = json.loads(line)
    if c["method"] == "UpdateLoadBalancer" and "error" not in c:
        per[c["key"]] += 1
n = int(sys.argv[2])
print(f"UpdateLoadBalancer accepted (call log): {sum(per.values())}; per load balancer max {max(per.values(), default=0)}, "
      f"mean {sum(per.values()) / n:.1f}, min {min(per.values(), default=0) if len(per) == n else 0}")
PY
grep -E 'VmHWM|VmRSS' /proc/$ccm/status
curl -sk "https://127.0.0.1:$ADMIN/debug/pprof/heap" -o "$dir/heap.pb.gz"
python3 bin/bench/pprof_top.py "$dir/heap.pb.gz" 30
wait_profile=0
until [ "$PROFILE_SECONDS" -eq 0 ] || [ -s "$dir/cpu.pb.gz" ] || [ $wait_profile -ge 300 ]; do sleep 1; wait_profile=$((wait_profile + 1)); done
[ -s "$dir/cpu.pb.gz" ] && python3 bin/bench/pprof_top.py "$dir/cpu.pb.gz" 30
echo "logs and profiles in $dir"
trap - EXIT
sent=$(date +%s.%N)
kill $ccm; wait $ccm 2>/dev/null || true
echo "exited $(python3 -c "print(round($(date +%s.%N) - $sent, 1))") s after SIGTERM"
kill $(jobs -p) 2>/dev/null || true
