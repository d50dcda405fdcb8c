#!/usr/bin/env bash
# braid-verbs-conn-test in the soft-RoCE test guest (tools/vm): a verbs connection striped over 4
# rxe rails (net_plugin/transport/verbs/verbs_conn.c), both ends in one process, every byte verified:
#   (1) messages of 0, 1, 4095 bytes, a chunk, a chunk + 1, 3 MiB + 5, then 2 s of 1 MiB messages;
#   (2) rail 1 black-holed mid-run (`netem loss 100%` on the receiver's side: its ACKs vanish,
#       the data it carried may have landed): the run completes verified, rail 1 failed (its
#       port stays up, so it may rejoin and fail its probe again meanwhile: "failed N times");
#   (3) rail 2 cut mid-run (loss 100% both ways): the same;
#   (4) NCCL's optional completion (--hint): over one rail receives are handed over to the
#       connection and never tested, the receiver never driven for them, and their data still
#       lands (verified in place); over 4 rails none is (a rail's fence needs the receiver);
#   (5) a send larger than its receive (--mismatch): both ends fail as the application's error
#       (ncclInvalidUsage in the plugin), each naming both sizes, within 10 s;
#   (6) the GPUDirect flush path on real rxe loopback QPs (--flush; host memory, so a plumbing
#       test, not GPUDirect): every verified receive over 2 rails flushed, each rail completing
#       one RDMA READ per flush;
#   (7) the same with rail 1 cut mid-run (loss both ways): the flushes still complete, on rail 0
#       for every one, rail 1 failed with fewer;
#   (8) every rail's interface taken down after flushes opened each rail's loopback QP
#       (--flush --dead-flush): a flush fails with the connection's error within 15 s instead
#       of hanging.
# A rail slowed to a tenth is covered through braid-perf by test/vm/verbs_perf_test.sh.
# Prints "vm: skipped (REASON)" and exits 77 where no guest can be booted (as test/vm/smoke.sh).
#   test/vm/verbs_conn_test.sh   (environment: BUILD, BRAID_VM_CACHE, BRAID_VM_ACCEL, VM_TIMEOUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/vm/lib.sh
vm_image
vm_share_built braid-verbs-conn-test

read -r -d '' guest_test <<'EOF' || true
set -uo pipefail
t=./braid-verbs-conn-test
fail() { echo "verbs-conn: FAIL: $*"; exit 1; }
$t --rails 4 --sizes --seconds 2 >/tmp/1.out 2>&1 || { cat /tmp/1.out; fail "(1) exit status"; }
cat /tmp/1.out
$t --rails 1 --hint --sizes --seconds 2 >/tmp/4a.out 2>&1 || { cat /tmp/4a.out; fail "(4) one rail: exit status"; }
cat /tmp/4a.out
grep -q "^detached [1-9][0-9]* of" /tmp/4a.out || fail "(4) no receive detached over one rail"
$t --rails 4 --hint --seconds 1 >/tmp/4b.out 2>&1 || { cat /tmp/4b.out; fail "(4) 4 rails: exit status"; }
grep "^detached" /tmp/4b.out
grep -q "^detached 0 of" /tmp/4b.out || fail "(4) a receive detached over 4 rails"
$t --rails 2 --mismatch >/tmp/5.out 2>&1 || { cat /tmp/5.out; fail "(5) size mismatch: exit status"; }
cat /tmp/5.out
# fault NAME CMD...: a run that waits on READY, CMD injects the fault, the run goes on 3 s.
# FARGS: the run's options (default: 4 rails).
fault() {
  local name=$1; shift
  mkfifo /tmp/go.$name
  # shellcheck disable=SC2086 # FARGS: words
  "$t" ${FARGS:---rails 4} --go --seconds 3 </tmp/go.$name >/tmp/$name.out 2>&1 &
  local pid=$! rc=0
  exec 3>/tmp/go.$name
  for _ in $(seq 300); do grep -q READY /tmp/$name.out && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  "$@"
  echo go >&3
  wait $pid || rc=$?
  exec 3>&-
  cat /tmp/$name.out
  [ $rc -eq 0 ] || fail "($name) exit status $rc"
}
fault blackhole braid-fabric netem 1 b loss 100%
grep -q "^rail 1: .*(failed [1-9][0-9]* times" /tmp/blackhole.out || fail "(2) rail 1 not taken down"
braid-fabric clear 1
fault cut sh -c 'braid-fabric netem 2 a loss 100%; braid-fabric netem 2 b loss 100%'
grep -q "^rail 2: .*(failed [1-9][0-9]* times" /tmp/cut.out || fail "(3) rail 2 not taken down"
braid-fabric clear 2
flushed() { sed -n 's/^flushed \([0-9]*\) receives$/\1/p' "$1"; }
$t --rails 2 --flush --sizes --seconds 1 >/tmp/6.out 2>&1 || { cat /tmp/6.out; fail "(6) flush: exit status"; }
cat /tmp/6.out
n=$(flushed /tmp/6.out)
[ "${n:-0}" -gt 0 ] || fail "(6) no receive flushed"
for r in 0 1; do grep -q "^rail $r: $n flush reads$" /tmp/6.out || fail "(6) rail $r: not one read per flush ($n)"; done
FARGS="--rails 2 --flush" fault flushcut sh -c 'braid-fabric netem 1 a loss 100%; braid-fabric netem 1 b loss 100%'
n=$(flushed /tmp/flushcut.out)
[ "${n:-0}" -gt 0 ] || fail "(7) no receive flushed"
grep -q "^rail 0: $n flush reads$" /tmp/flushcut.out || fail "(7) rail 0: not one read per flush ($n)"
m=$(sed -n 's/^rail 1: \([0-9]*\) flush reads\( (down)\)\? (failed [1-9][0-9]* times.*$/\1/p' /tmp/flushcut.out)
[ -n "$m" ] && [ "$m" -lt "$n" ] || fail "(7) rail 1 not failed with fewer flush reads than the $n flushes (${m:-none})"
braid-fabric clear 1
FARGS="--rails 2 --flush --dead-flush" fault deadflush sh -c 'ip link set vb0 down; ip link set vb1 down'
grep -q "^dead flush: failed after " /tmp/deadflush.out || fail "(8) no failed flush reported"
ip link set vb0 up; ip link set vb1 up; braid-fabric route 0; braid-fabric route 1
echo "verbs-conn: OK"
EOF

vm_run "verbs-conn test" "$guest_test"
