#!/usr/bin/env bash
# The demo: the example guests run on the embedded cluster while kubectl creates,
# changes and deletes objects; kubectl shows what the handlers did to them (status,
# annotations, finalizers, Events) and the handlers' log lines show what they saw.
#
# Guests: seed.wasm (on.event), indexes.wasm (indexes), minimal.wasm (Kopf's first
# example: on.create returning "hello world"), lifecycle.wasm (create, update, field,
# delete with a finalizer, temporary and permanent errors); and admission.wasm (admission
# webhooks: a validating and a mutating handler) in a second operator, started once the
# CRD exists, which the cluster calls on writes of KopfExamples.
set -euo pipefail

KAPSEL=${KAPSEL:-target/debug/kapsel}
GUEST_DIR=${GUEST_DIR:-target/guests/wasm32-wasip2/release}
REFERENCE=${REFERENCE:-examples/manifests}
WORK=$(mktemp -d)
LOG=$WORK/operator.log
ADMISSION_LOG=$WORK/admission.log
ADMISSION=""
export KUBECONFIG=$WORK/kubeconfig

command -v kubectl >/dev/null || { echo "The demo drives the cluster with kubectl; install it first." >&2; exit 2; }

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# What the checks found; the demo fails if any check did.
FAILED=()

# expect DESCRIPTION EXPECTED SECONDS COMMAND...: polls COMMAND until it prints
# EXPECTED (or SECONDS pass) and reports the outcome.
expect() {
    local what=$1 expected=$2 seconds=$3 got=""
    shift 3
    for _ in $(seq $((seconds * 5))); do
        got=$("$@" 2>/dev/null || true)
        [ "$got" = "$expected" ] && break
        sleep 0.2
    done
    if [ "$got" = "$expected" ]; then
        printf '  \033[32mok\033[0m   %s: %s\n' "$what" "$got"
    else
        printf '  \033[31mFAIL\033[0m %s: expected %q, got %q\n' "$what" "$expected" "$got"
        FAILED+=("$what")
    fi
}

# show TITLE KUBECTL-ARGS...: prints what kubectl answers, indented.
show() {
    local title=$1
    shift
    echo "  $title:"
    kubectl "$@" 2>&1 | sed 's/^/    /' || true
    echo
}

GUESTS=(seed.wasm indexes.wasm minimal.wasm lifecycle.wasm)
step "Starting the operator on an embedded cluster (guests: ${GUESTS[*]})"
# started PID LOG: waits until the operator PID logs into LOG that it is running.
started() {
    for _ in $(seq 600); do  # compiling the guests takes a while on a busy machine
        grep -q "The operator is running" "$2" 2>/dev/null && return
        kill -0 "$1" 2>/dev/null || { cat "$2"; echo "The operator exited early." >&2; exit 1; }
        sleep 0.1
    done
    cat "$2"
    echo "The operator did not start." >&2
    exit 1
}

"$KAPSEL" run --embedded --kubeconfig "$KUBECONFIG" -A --log-format plain \
    "${GUESTS[@]/#/$GUEST_DIR/}" >"$LOG" 2>&1 &
OPERATOR=$!
TAILS=()
cleanup() {
    kill "${TAILS[@]}" 2>/dev/null || true
    kill -9 $OPERATOR $ADMISSION 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
started $OPERATOR "$LOG"
sed 's/^/  operator| /' "$LOG"
tail -n0 -f "$LOG" | sed -u 's/^/  operator| /' &
TAILS+=($!)

step "kubectl apply: the KopfExample CRD (served without restarting the operator)"
kubectl apply -f "$REFERENCE/kopfexamples-crd.yaml"
sleep 1

step "Admission webhooks: a second operator serving admission.wasm's handlers over HTTPS"
# Its certificate is generated into a Secret (default/kopfexamples.kapsel.dev-admission-tls);
# it writes the webhook configurations kopfexamples.kapsel.dev, which call it by URL.
"$KAPSEL" run --kubeconfig "$KUBECONFIG" -A --standalone --log-format plain \
    --admission-listen 127.0.0.1:0 --admission-managed kopfexamples.kapsel.dev \
    "$GUEST_DIR/admission.wasm" >"$ADMISSION_LOG" 2>&1 &
ADMISSION=$!
started $ADMISSION "$ADMISSION_LOG"
sed 's/^/  admission| /' "$ADMISSION_LOG"
tail -n0 -f "$ADMISSION_LOG" | sed -u 's/^/  admission| /' &
TAILS+=($!)
expect "the webhooks the cluster calls" \
    "check-field.kopfexamples.kapsel.dev mark-seen.kopfexamples.kapsel.dev" 10 \
    kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations \
    kopfexamples.kapsel.dev -o 'jsonpath={.items[*].webhooks[*].name}'

step "kubectl apply: a KopfExample whose spec.field is forbidden (check_field refuses it)"
refused=$(kubectl apply -f - 2>&1 <<'EOF' || true
apiVersion: kopf.dev/v1
kind: KopfExample
metadata:
  name: kopf-example-forbidden
spec:
  field: forbidden
EOF
)
echo "  $refused"
expect "the refusal" "denied the request: field must not be forbidden" 1 \
    grep -o "denied the request: field must not be forbidden" <<<"$refused"
expect "nothing stored" "" 1 kubectl get kex kopf-example-forbidden --ignore-not-found -o name

step "kubectl apply: a KopfExample object (mark_seen labels it; minimal.wasm answers hello world)"
kubectl apply -f "$REFERENCE/kopfexample-obj.yaml"
expect "its label admission.kapsel.dev/seen (set before it was stored)" "yes" 1 \
    kubectl get kex kopf-example-1 -o "jsonpath={.metadata.labels['admission\\.kapsel\\.dev/seen']}"
expect "status.create_fn.message" "hello world" 15 \
    kubectl get kex kopf-example-1 -o 'jsonpath={.status.create_fn.message}'

step "lifecycle.wasm: the creation handlers, a temporary error retried twice, the finalizer"
expect "status.created.message" "created kopf-example-1" 15 \
    kubectl get kex kopf-example-1 -o 'jsonpath={.status.created.message}'
expect "status.flaky.attempts (two temporary errors, then success)" "3" 20 \
    kubectl get kex kopf-example-1 -o 'jsonpath={.status.flaky.attempts}'
expect "status.phase (set through the patch)" "Greeted" 5 \
    kubectl get kex kopf-example-1 -o 'jsonpath={.status.phase}'
expect "metadata.finalizers (a non-optional delete handler)" '["kopf.zalando.org/KopfFinalizerMarker"]' 5 \
    kubectl get kex kopf-example-1 -o 'jsonpath={.metadata.finalizers}'
show "status" get kex kopf-example-1 -o 'jsonpath={.status}'
show "annotations (progress records, the diff-base)" get kex kopf-example-1 -o 'jsonpath={.metadata.annotations}'

step "kubectl patch spec.field: an update and a field change"
kubectl patch kex kopf-example-1 --type merge -p '{"spec": {"field": "changed"}}'
expect "status['field_changed/spec.field'].new" "changed" 15 \
    kubectl get kex kopf-example-1 -o "jsonpath={.status['field_changed/spec\\.field'].new}"
expect "status.updated.changes" "1" 15 \
    kubectl get kex kopf-example-1 -o 'jsonpath={.status.updated.changes}'

step "kubectl apply: a second object labelled demo/break=yes (a permanent failure)"
kubectl apply -f - <<'EOF'
apiVersion: kopf.dev/v1
kind: KopfExample
metadata:
  name: kopf-example-2
  labels:
    demo/break: "yes"
spec:
  field: other
EOF
expect "status.flaky.attempts of kopf-example-2 (the others still run)" "3" 20 \
    kubectl get kex kopf-example-2 -o 'jsonpath={.status.flaky.attempts}'
expect "the permanent failure, logged once (no retries)" \
    "[default/kopf-example-2] Handler 'broken' failed permanently: this handler never works (label demo/break=yes)" 5 \
    grep -F "Handler 'broken'" "$LOG"
expect "the creation cycle of kopf-example-2" \
    "[default/kopf-example-2] Creation is processed: 4 succeeded; 1 failed." 5 \
    grep -F "[default/kopf-example-2] Creation is processed" "$LOG"

step "kubectl run: two pods in 'default', one in 'demo'"
kubectl create namespace demo
kubectl run web-1 --image=nginx
kubectl run web-2 --image=nginx
kubectl run -n demo api-1 --image=nginx
sleep 2
step "kubectl label + delete: more events"
kubectl label kex kopf-example-1 demo=yes
kubectl delete pod web-2 --wait=false
sleep 1

step "kubectl delete: the delete handler runs, then the finalizer goes and so does the object"
kubectl delete kex kopf-example-1 --timeout=20s || true
expect "kopf-example-1 is gone" "" 15 kubectl get kex kopf-example-1 --ignore-not-found -o name
expect "the delete handler ran" \
    "[default/kopf-example-1] deleting: Deleting kopf-example-1: the finalizer goes once this returns." 5 \
    grep -F "[default/kopf-example-1] deleting:" "$LOG"
kubectl delete kex kopf-example-2 --timeout=20s || true

step "kubectl get events"
kubectl get events -A 2>&1 | sed 's/^/  /' || true
expect "the Greeting Event about kopf-example-1" "Greeting: Hello, kopf-example-1!" 5 \
    kubectl get events --field-selector involvedObject.name=kopf-example-1 \
    -o 'jsonpath={range .items[?(@.reason=="Greeting")]}{.reason}: {.message}{end}'

step "Stopping the operators (SIGINT)"
kill -INT $ADMISSION $OPERATOR
admission_status=0
wait $ADMISSION || admission_status=$?
status=0
wait $OPERATOR || status=$?
kill "${TAILS[@]}" 2>/dev/null || true

step "What the handlers did (the on.event lines left out)"
grep -E '^\[[^]]+\] ' "$LOG" | grep -v ' log_event: ' | sed 's/^/  /' || true
events=$(grep -c ' log_event: event ' "$LOG" || true)
echo
echo "The operator exited with status $status after $events on.event log lines;" \
    "the admission operator with status $admission_status."
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "Checks that failed: ${FAILED[*]}" >&2
fi
[ "$status" -eq 0 ] && [ "$admission_status" -eq 0 ] && [ "$events" -gt 0 ] && [ ${#FAILED[@]} -eq 0 ]
