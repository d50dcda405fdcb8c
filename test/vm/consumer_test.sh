#!/usr/bin/env bash
# net-consumer (test/consumer: the plugin driven as NCCL's other consumers drive it: close right
# after completion, grouped and eager receives, a reused listen comm, two rings) over the verbs
# transport in the soft-RoCE test guest (tools/vm): rank 0 on rails va0-va3 (rxe_a0-3), rank 1 on
# vb0-vb3 (rxe_b0-3), every message checked.
# Prints "vm: skipped (REASON)" and exits 77 where no guest can be booted (as test/vm/smoke.sh).
#   test/vm/consumer_test.sh   (environment: BUILD, BRAID_VM_CACHE, BRAID_VM_ACCEL, VM_TIMEOUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/vm/lib.sh
vm_image
make -s BUILD="$build" "$build/net-consumer" "$build/libnccl-net-braid.so" >&2 || { echo "vm: FAIL: build" >&2; exit 1; }
vm_share "$build/net-consumer" "$build/libnccl-net-braid.so"

read -r -d '' guest_test <<'EOF' || true
set -uo pipefail
export BRAID_TRANSPORT=verbs BRAID_TIMEOUT_MS=30000 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
timeout 300 ./net-consumer -n 2 -i 5 -I "va;vb" ./libnccl-net-braid.so >/tmp/c.out 2>&1
rc=$?
grep -v " braid INFO " /tmp/c.out | tail -n 20
[ $rc -eq 0 ] && grep -q "^ok rings" /tmp/c.out || { echo "consumer-verbs: FAIL: exit $rc"; exit 1; }
grep -q "transport: verbs" /tmp/c.out || { echo "consumer-verbs: FAIL: the verbs transport was not chosen"; exit 1; }
echo "consumer-verbs: OK"
EOF

# Under TCG a guest test of this size takes a minute or two; a hang ends at the driver's own
# limits (20 s per step) or here.
VM_TIMEOUT=${VM_TIMEOUT:-360}
vm_run "consumer-verbs test" "$guest_test"
