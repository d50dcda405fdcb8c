#!/usr/bin/env bash
# Smoke test of the soft-RoCE test guest (tools/vm): builds or reuses the cached image, boots it
# and, inside, lists the verbs devices, runs ibv_rc_pingpong between rxe_a0 and rxe_b0 over rail
# 0 (and ib_write_bw where perftest is in the image), and checks that the traffic really
# crossed the veth pair. Prints the time the image build and the boot+smoke took.
# Prints "vm: skipped (REASON)" and exits 77 where no guest can be booted (not root and no image,
# packages unavailable, qemu missing); exits non-zero on a real failure.
#   test/vm/smoke.sh            (environment: BRAID_VM_CACHE, BRAID_VM_ACCEL, VM_TIMEOUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/vm/lib.sh
vm_image
echo "vm: image: $build_note"

# ---- the test, run inside the guest ---------------------------------------------------------
read -r -d '' guest_test <<'EOF' || true
set -euo pipefail
fail() { echo "smoke: FAIL: $*"; exit 1; }
wait_listen() { # port: wait up to 10 s for a listener
  for _ in $(seq 100); do ss -ltn | grep -q ":$1 " && return 0; sleep 0.1; done
  fail "nothing listens on port $1"
}
stat_of() { cat "/sys/class/net/$1/statistics/$2"; }

echo "smoke: ibv_devices"
ibv_devices | tee /tmp/devs
n=$(grep -c 'rxe_[ab][0-9]' /tmp/devs || true)
[ "$n" -eq $((2 * BRAID_VM_RAILS)) ] || fail "expected $((2 * BRAID_VM_RAILS)) rxe devices, found $n"
ga=$(braid-fabric gid rxe_a0) gb=$(braid-fabric gid rxe_b0)
echo "smoke: rail 0 GID indexes: rxe_a0 $ga, rxe_b0 $gb"

ping -c 1 -W 2 -I 10.88.0.1 10.88.0.2 >/dev/null || fail "no IP path 10.88.0.1 -> 10.88.0.2"
tx0=$(stat_of va0 tx_packets) rx0=$(stat_of vb0 rx_packets)

echo "smoke: ibv_rc_pingpong rxe_a0 -> rxe_b0 (rail 0)"
timeout 60 ibv_rc_pingpong -d rxe_b0 -g "$gb" -n 100 >/tmp/pp-server.log 2>&1 & srv=$!
wait_listen 18515
if ! timeout 60 ibv_rc_pingpong -d rxe_a0 -g "$ga" -n 100 10.88.0.2; then
  cat /tmp/pp-server.log; fail "ibv_rc_pingpong client failed"
fi
wait "$srv" || { cat /tmp/pp-server.log; fail "ibv_rc_pingpong server failed"; }
cat /tmp/pp-server.log

tx1=$(stat_of va0 tx_packets) rx1=$(stat_of vb0 rx_packets)
echo "smoke: va0 sent $((tx1 - tx0)) packets, vb0 received $((rx1 - rx0))"
[ $((tx1 - tx0)) -ge 200 ] && [ $((rx1 - rx0)) -ge 200 ] || fail "the RDMA traffic did not cross the veth pair"

if command -v ib_write_bw >/dev/null; then
  echo "smoke: ib_write_bw rxe_a0 -> rxe_b0 (rail 0)"
  timeout 60 ib_write_bw -d rxe_b0 -x "$gb" -n 200 -s 65536 >/tmp/bw-server.log 2>&1 & srv=$!
  wait_listen 18515
  if ! timeout 60 ib_write_bw -d rxe_a0 -x "$ga" -n 200 -s 65536 10.88.0.2; then
    cat /tmp/bw-server.log; fail "ib_write_bw client failed"
  fi
  wait "$srv" || { cat /tmp/bw-server.log; fail "ib_write_bw server failed"; }
else
  echo "skip ib_write_bw (not in the image: no perftest)"
fi
echo "smoke: OK"
EOF

vm_share # the smoke needs nothing from the host (the repository would be packed whole)
vm_run smoke "$guest_test"
