#!/usr/bin/env bash
# braid-verbs-ep-test in the soft-RoCE test guest (tools/vm): boots it once and, inside, runs the
# verbs endpoint (net_plugin/transport/verbs/verbs_ep.c) between rxe_a<r> and rxe_b<r> in one process:
#   (1)+(2) control messages both ways and 64 x 256 KiB WRITE_WITH_IMM, on rails 0 and 3;
#   (3) --blackhole on rail 0: after the warm-up, `braid-fabric netem 0 b loss 100%` (rxe_b0's
#       ACKs vanish), then writes from rxe_a0 must fail with a work-completion error within 3 s.
# The test binary is built on the host (make) and is the only file shared with the guest.
# Prints "vm: skipped (REASON)" and exits 77 where no guest can be booted (as test/vm/smoke.sh).
#   test/vm/verbs_ep_test.sh     (environment: BUILD, BRAID_VM_CACHE, BRAID_VM_ACCEL, VM_TIMEOUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/vm/lib.sh
vm_image
vm_share_built braid-verbs-ep-test

# ---- the test, run inside the guest -----------------------------------------------------------
read -r -d '' guest_test <<'EOF' || true
set -euo pipefail
fail() { echo "verbs-ep: FAIL: $*"; exit 1; }
t=./braid-verbs-ep-test
if ldd "$t" | grep 'not found'; then fail "a library of the test is missing in the guest"; fi
for r in 0 3; do
  echo "verbs-ep: rail $r"
  "$t" --rail "$r" || fail "rail $r: exit status $?"
done

echo "verbs-ep: blackhole on rail 0"
mkfifo /tmp/go
"$t" --blackhole --rail 0 </tmp/go >/tmp/bh.out 2>&1 &
pid=$!
exec 3>/tmp/go
for _ in $(seq 600); do grep -q READY /tmp/bh.out && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
grep -q READY /tmp/bh.out || { cat /tmp/bh.out; fail "(3) no READY"; }
braid-fabric netem 0 b loss 100%
echo go >&3
rc=0; wait "$pid" || rc=$?
exec 3>&-
braid-fabric clear 0
cat /tmp/bh.out
[ "$rc" -eq 0 ] || fail "(3) exit status $rc"
ms=$(sed -n 's/^blackhole: first error after \([0-9]*\) ms.*/\1/p' /tmp/bh.out)
[ -n "$ms" ] || fail "(3) no error time reported"
[ "$ms" -le 3000 ] || fail "(3) error after $ms ms, more than 3 s"
echo "verbs-ep: OK (dead peer detected after $ms ms)"
EOF

vm_run "verbs-ep test" "$guest_test"
