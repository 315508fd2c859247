#!/usr/bin/env bash
# The demo: the example guests run on the embedded cluster while kubectl creates,
# changes and deletes objects; the handlers' log lines show what they saw.
set -euo pipefail

KAPSEL=${KAPSEL:-target/debug/kapsel}
GUEST_DIR=${GUEST_DIR:-target/guests/wasm32-wasip2/release}
REFERENCE=${REFERENCE:-examples/manifests}
WORK=$(mktemp -d)
LOG=$WORK/operator.log
export KUBECONFIG=$WORK/kubeconfig

command -v kubectl >/dev/null || { echo "The demo drives the cluster with kubectl; install it first." >&2; exit 2; }

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Starting the operator on an embedded cluster (guests: seed.wasm, indexes.wasm)"
"$KAPSEL" run --embedded --kubeconfig "$KUBECONFIG" -A --log-format plain \
    "$GUEST_DIR/seed.wasm" "$GUEST_DIR/indexes.wasm" >"$LOG" 2>&1 &
OPERATOR=$!
trap 'kill -9 $OPERATOR 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do
    grep -q "The operator is running" "$LOG" 2>/dev/null && break
    kill -0 $OPERATOR 2>/dev/null || { cat "$LOG"; echo "The operator exited early." >&2; exit 1; }
    sleep 0.1
done
grep -q "The operator is running" "$LOG" || { cat "$LOG"; echo "The operator did not start." >&2; exit 1; }
sed 's/^/  operator| /' "$LOG"
tail -n0 -f "$LOG" | sed -u 's/^/  operator| /' &
TAIL=$!
trap 'kill $TAIL 2>/dev/null || true; kill -9 $OPERATOR 2>/dev/null || true; rm -rf "$WORK"' EXIT

step "kubectl apply: the KopfExample CRD (served without restarting the operator)"
kubectl apply -f "$REFERENCE/kopfexamples-crd.yaml"
sleep 1
step "kubectl apply: a KopfExample object"
kubectl apply -f "$REFERENCE/kopfexample-obj.yaml"
step "kubectl run: two pods in 'default', one in 'demo'"
kubectl create namespace demo
kubectl run web-1 --image=nginx
kubectl run web-2 --image=nginx
kubectl run -n demo api-1 --image=nginx
sleep 2
step "kubectl label + delete: more events"
kubectl label kex kopf-example-1 demo=yes
kubectl delete pod web-2 --wait=false
kubectl delete kex kopf-example-1 --wait=false
sleep 2

step "Stopping the operator (SIGINT)"
kill -INT $OPERATOR
wait $OPERATOR
status=$?
kill $TAIL 2>/dev/null || true

step "What the handlers did"
grep -E "handler|event|pods in" "$LOG" | grep -E "guest|seed|indexes" | sed 's/^/  /' || true
events=$(grep -c "event " "$LOG" || true)
echo
echo "The operator exited with status $status after $events handler log lines."
[ "$status" -eq 0 ] && [ "$events" -gt 0 ]
