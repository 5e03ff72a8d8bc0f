#!/usr/bin/env bash
# The scale run of docs/benchmarks.md §8: the stock binary (cloud-node + service, fake cloud,
# leader election off) against a standalone kube-testenv; NODES kubelet-shaped Nodes join at
# RATE per second under SERVICES LoadBalancer Services. Prints the binary's peak and final RSS
# (VmHWM / VmRSS), its events written against its successful UpdateLoadBalancer calls, its dropped
# events, and the top of a heap profile taken at the end (/debug/pprof/heap, decoded by
# pprof_top.py). Needs kubectl, curl and python3; builds nothing itself:
#   cargo build --release -p cloud-controller-manager -p kube-testenv
#   bin/bench/scale-run.sh            # NODES=3000 SERVICES=1000 RATE=100 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
NODES=${NODES:-3000} SERVICES=${SERVICES:-1000} RATE=${RATE:-100}
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
for b in range(0, nodes, 100):
    items = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"node-{i:05}", "labels": {"kubernetes.io/hostname": f"node-{i:05}"}},
              "spec": {"taints": taint}} for i in range(b, min(b + 100, nodes))]
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(f"{d}/nodes-{b // 100:03}.json", "w"))
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

start=$(date +%s.%N)
per=$(python3 -c "print(100 / $RATE)")
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
grep -E 'VmHWM|VmRSS' /proc/$ccm/status
curl -sk "https://127.0.0.1:$ADMIN/debug/pprof/heap" -o "$dir/heap.pb.gz"
python3 bin/bench/pprof_top.py "$dir/heap.pb.gz" 30
echo "logs and profile in $dir"
trap - EXIT
kill $ccm; wait $ccm 2>/dev/null || true
kill $(jobs -p) 2>/dev/null || true
