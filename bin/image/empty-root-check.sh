#!/usr/bin/env bash
# The image's promise without a container builder: the static stock binary runs from an empty
# root (only the CA bundle and a kubeconfig, no environment) against a standalone kube-testenv,
# initializes a Node and provisions a load balancer. docs/operating.md, "Image". Run as root (for
# chroot) after building both binaries. The root is not writable by the binary's user, as the
# image's read-only root filesystem: the admin port's certificate stays in memory. Builds nothing:
#   RUSTFLAGS='-C target-feature=+crt-static --cfg getrandom_backend="linux_getrandom"' \
#     cargo build --locked --release --target x86_64-unknown-linux-gnu -p cloud-controller-manager
#   cargo build --locked -p kube-testenv
#   bin/image/empty-root-check.sh
set -euo pipefail
CHROOT=$(command -v chroot)
cd "$(dirname "$0")/../.."
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/cloud-controller-manager}
TESTENV=${TESTENV:-target/debug/kube-testenv}
PORT=${PORT:-16553} ADMIN=${ADMIN:-10399}
root=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$root"' EXIT

# glibc's ldd says "not a dynamic executable" for a static binary, "statically linked" for a
# static PIE (what +crt-static gives), and lists libraries otherwise.
if ! ldd "$BIN" 2>&1 | grep -q -E 'not a dynamic executable|statically linked'; then
  echo "FAIL: $BIN is dynamically linked:" >&2; ldd "$BIN" >&2; exit 1
fi
echo "ok: $BIN is static ($(du -h "$BIN" | cut -f1))"

mkdir -p "$root/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
cp "$BIN" "$root/cloud-controller-manager"
"$TESTENV" --port "$PORT" --kubeconfig "$root/kubeconfig" >"$root/testenv.log" 2>&1 &
export KUBECONFIG=$root/kubeconfig
until kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.2; done
printf 'adoptUnknownNodes: true\nloadBalancerPool: {cidr: 10.201.0.0/16}\n' >"$root/cloud.yaml"
chmod -R a+rX "$root"
echo "root holds: $(cd "$root" && find . -type f ! -name '*.log' | sort | tr '\n' ' ')"

env -i "$CHROOT" --userspec=65532:65532 "$root" /cloud-controller-manager --version
env -i "$CHROOT" --userspec=65532:65532 "$root" /cloud-controller-manager \
  --kubeconfig=/kubeconfig --cloud-provider=fake --cloud-config=/cloud.yaml \
  --controllers=cloud-node,service --configure-cloud-routes=false \
  --leader-elect=true --leader-elect-resource-namespace=default \
  --secure-port="$ADMIN" >"$root/ccm.log" 2>&1 &

kubectl create -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Node
metadata: {name: empty-root-node}
spec:
  taints: [{key: node.cloudprovider.kubernetes.io/uninitialized, value: "true", effect: NoSchedule}]
---
apiVersion: v1
kind: Service
metadata: {name: empty-root-lb, namespace: default}
spec: {type: LoadBalancer, selector: {app: x}, ports: [{port: 80}]}
YAML
for _ in $(seq 150); do
  pid=$(kubectl get node empty-root-node -o jsonpath='{.spec.providerID}')
  ip=$(kubectl get svc empty-root-lb -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
  holder=$(kubectl get lease -n default cloud-controller-manager -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  health=$(curl -sk "https://127.0.0.1:$ADMIN/healthz" || true)
  if [ -n "$pid" ] && [ -n "$ip" ] && [ -n "$holder" ] && [ "$health" = ok ]; then
    echo "ok: from the empty root, Node providerID=$pid, load balancer $ip, Lease held by $holder, /healthz ok"
    exit 0
  fi
  sleep 0.2
done
echo "FAIL: not converged in 30 s; the binary's log:" >&2; tail -20 "$root/ccm.log" >&2; exit 1
