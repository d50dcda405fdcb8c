#!/usr/bin/env bash
# braid-verbs-probe in the soft-RoCE test guest (tools/vm): boots it once and, inside, checks the
# verbs rails net_plugin/transport/verbs/verbs_dev.c discovers over the rxe devices:
#   (a) no filter: every rxe_a<r>/rxe_b<r> port, Ethernet, RoCE v2, the IPv4-mapped GID of its
#       rail's address, at the index `braid-fabric gid` names;
#   (b) BRAID_IB_HCA==rxe_a0:1: exactly that rail;  (c) BRAID_IB_HCA=^rxe_b: only rxe_a*;
#   and NCCL_IB_HCA as the fallback, BRAID_IB_GID_INDEX, a filter that selects nothing and a
#   malformed one (exit 1 with the reason), and ports whose link is down (skipped; a WARN when
#   BRAID_IB_HCA names them).
# The probe is built on the host (make) and is the only file shared with the guest.
# Prints "vm: skipped (REASON)" and exits 77 where no guest can be booted (as test/vm/smoke.sh).
#   test/vm/verbs_probe_test.sh     (environment: BUILD, BRAID_VM_CACHE, BRAID_VM_ACCEL, VM_TIMEOUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/vm/lib.sh
vm_image
vm_share_built braid-verbs-probe

# ---- the test, run inside the guest -----------------------------------------------------------
read -r -d '' guest_test <<'EOF' || true
set -euo pipefail
fail() { echo "verbs-probe: FAIL: $*"; exit 1; }
probe=./braid-verbs-probe
rails=$BRAID_VM_RAILS
# run NAME [VAR=VALUE...]: the probe's stdout in /tmp/NAME.out, its rows (one per rail) in
# /tmp/NAME.rows; returns its exit status.
run() {
  local name=$1; shift
  echo "verbs-probe: ($name) ${*:-no filter}"
  local rc=0
  env "$@" "$probe" >"/tmp/$name.out" 2>"/tmp/$name.err" || rc=$?
  cat "/tmp/$name.out" "/tmp/$name.err"
  grep -E '^rxe_' "/tmp/$name.out" >"/tmp/$name.rows" || true
  return "$rc"
}
devs() { awk '{ print $1 }' "/tmp/$1.rows" | tr '\n' ' '; }

# The runtime libraries it needs.
if ldd "$probe" | grep 'not found'; then fail "a library of the probe is missing in the guest"; fi
[ -e /usr/lib/x86_64-linux-gnu/libibverbs.so.1 ] || fail "libibverbs.so.1 is not in the guest"
$probe --help >/dev/null || fail "--help"

# (a) no filter: all 2 x rails ports, each with its IPv4 RoCE v2 GID.
run all || fail "(a) exit status $? with rxe devices present"
[ "$(wc -l </tmp/all.rows)" -eq $((2 * rails)) ] || fail "(a) expected $((2 * rails)) rails, got: $(devs all)"
for r in $(seq 0 $((rails - 1))); do
  for side in a b; do
    dev=rxe_$side$r host=1; [ $side = b ] && host=2
    row=$(grep -E "^$dev:1 " /tmp/all.rows) || fail "(a) no rail for $dev:1"
    read -r _ link mtu mbps idx roce gid <<<"$row"
    want=$(braid-fabric gid "$dev")
    [ "$link" = Ethernet ] || fail "(a) $dev: link layer $link"
    [ "$roce" = v2 ] || fail "(a) $dev: RoCE $roce, not v2"
    [ "$gid" = "::ffff:10.88.$r.$host" ] || fail "(a) $dev: GID $gid, not ::ffff:10.88.$r.$host"
    [ "$idx" = "$want" ] || fail "(a) $dev: GID index $idx, braid-fabric says $want"
    [ "$mtu" -ge 256 ] && [ "$mtu" -le 4096 ] || fail "(a) $dev: MTU $mtu"
    [ "$mbps" -gt 0 ] || fail "(a) $dev: speed $mbps"
  done
done

# (b) one exact device and port.
run exact BRAID_IB_HCA==rxe_a0:1 || fail "(b) exit status $?"
[ "$(devs exact)" = "rxe_a0:1 " ] || fail "(b) expected only rxe_a0:1, got: $(devs exact)"

# (c) exclusion.
run exclude BRAID_IB_HCA=^rxe_b || fail "(c) exit status $?"
[ "$(wc -l </tmp/exclude.rows)" -eq "$rails" ] || fail "(c) expected $rails rails, got: $(devs exclude)"
if grep -v '^rxe_a' /tmp/exclude.rows; then fail "(c) a rail that is not rxe_a*"; fi

# NCCL_IB_HCA is the fallback; BRAID_IB_HCA wins over it.
run nccl NCCL_IB_HCA=rxe_b1 || fail "(nccl) exit status $?"
[ "$(devs nccl)" = "rxe_b1:1 " ] || fail "(nccl) expected only rxe_b1:1, got: $(devs nccl)"
run both NCCL_IB_HCA=rxe_b1 BRAID_IB_HCA=rxe_a1,rxe_a2:1 || fail "(both) exit status $?"
[ "$(devs both)" = "rxe_a1:1 rxe_a2:1 " ] || fail "(both) expected rxe_a1:1 rxe_a2:1, got: $(devs both)"

# A GID index given by the user is used as is.
run gid0 BRAID_IB_HCA==rxe_a0 BRAID_IB_GID_INDEX=0 || fail "(gid0) exit status $?"
grep -qE '^rxe_a0:1 .* 0\* ' /tmp/gid0.rows || fail "(gid0) GID index 0 not used"

# Nothing selected, port 2 that does not exist, malformed: exit 1 with the reason.
for c in "none BRAID_IB_HCA=mlx5" "port2 BRAID_IB_HCA=rxe_a0:2" "bad BRAID_IB_HCA=rxe_a0:x" "badgid BRAID_IB_GID_INDEX=300"; do
  set -- $c
  rc=0; run "$@" || rc=$?
  [ "$rc" -eq 1 ] || fail "($1) exit status $rc, not 1"
  grep -q 'no rails: ' "/tmp/$1.out" || fail "($1) no reason printed"
done
grep -q 'selects none of the ports found: rxe_a0:1' /tmp/none.out || fail "(none) the ports found are not named"
grep -q 'port that is not a number' /tmp/bad.out || fail "(bad) the reason is not given"

# A port that is not active: rail 3's link down takes rxe_a3 and rxe_b3 down.  Unfiltered they
# are skipped (INFO); named, the probe WARNs and says no selected port is active.
ip link set va3 down
for _ in $(seq 50); do grep -q ACTIVE /sys/class/infiniband/rxe_a3/ports/1/state || break; sleep 0.1; done
run down NCCL_DEBUG=INFO || fail "(down) exit status $?"
[ "$(wc -l </tmp/down.rows)" -eq $((2 * rails - 2)) ] || fail "(down) expected $((2 * rails - 2)) rails, got: $(devs down)"
if grep -E '^rxe_[ab]3:' /tmp/down.rows; then fail "(down) a rail on the downed link"; fi
grep -q 'rxe_a3:1: port DOWN, not ACTIVE; skipped' /tmp/down.err || fail "(down) no INFO for rxe_a3:1"
rc=0; run named BRAID_IB_HCA=rxe_a3 || rc=$?
[ "$rc" -eq 1 ] || fail "(named) exit status $rc, not 1"
grep -q 'WARN.*rxe_a3:1 is selected by BRAID_IB_HCA but its port is DOWN' /tmp/named.err || fail "(named) no WARN"
grep -q 'no rails: no selected port is ACTIVE (rxe_a3:1)' /tmp/named.out || fail "(named) no reason"
echo "verbs-probe: OK"
EOF

vm_run "verbs-probe test" "$guest_test"
