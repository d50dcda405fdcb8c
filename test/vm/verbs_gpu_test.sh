#!/usr/bin/env bash
# GPU-memory plumbing of the verbs transport in the soft-RoCE test guest (tools/vm), issue 21.
# PLUMBING ONLY, not GPUDirect: rxe copies with the CPU, and the "dma-buf" memory is host memory.
# The guest kernel (Debian 6.1) has no udmabuf, so braid-perf's --mem memfd stands in: a memfd's
# own fd passed to regMrDmaBuf (test only), registered by test/vm/dmabuf_shim.c (mmap of the fd,
# ibv_reg_mr_iova2 at the iova braid asks for) opened through BRAID_IBVERBS_LIB. Two ranks, rank 0
# on va0/va1 (rxe_a0, rxe_a1), rank 1 on vb0/vb1, the real plugin, every iteration checked:
#   (1) without the shim: rxe's real answer to NCCL's dma-buf probe (EOPNOTSUPP), so ptrSupport
#       0x1 and braid-perf refuses --mem memfd with exit 3, naming NCCL_PTR_DMABUF;
#   (2) with the shim: ptrSupport 0x5, sendrecv 8 B .. 4 MiB in memfd memory registered through
#       regMrDmaBuf (every registration the shim's), data checked end to end;
#   (3) a ring allreduce (Simple: its staging buffers in that memory), the same;
#   (4) rail 1 cut mid-run (loss both ways): the run completes verified, the fence logged.
# The flush path (iflush's RDMA READs on rxe loopback QPs) is test/vm/verbs_conn_test.sh's (6)-(8).
# Prints "vm: skipped (REASON)" and exits 77 where no guest can be booted (as test/vm/smoke.sh).
#   test/vm/verbs_gpu_test.sh   (environment: BUILD, BRAID_VM_CACHE, BRAID_VM_ACCEL, VM_TIMEOUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/vm/lib.sh
vm_image
make -s BUILD="$build" "$build/braid-perf" "$build/libnccl-net-braid.so" "$build/libbraid-dmabuf-shim.so" >&2 ||
  { echo "vm: FAIL: build" >&2; exit 1; }
vm_share "$build/braid-perf" "$build/libnccl-net-braid.so" "$build/libbraid-dmabuf-shim.so"

read -r -d '' guest_test <<'EOF' || true
set -uo pipefail
export BRAID_TRANSPORT=verbs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT BRAID_WAIT_WARN_MS=15000
fail() { echo "verbs-gpu: FAIL: $*"; exit 1; }
# run NAME [FAULT-CMD] -- BRAID-PERF-ARGS...: both ranks over two rails; FAULT-CMD runs 2 s after
# rank 0's table header. WANT: the exit status both ranks must have (default 0: then every
# iteration must be checked and right).
run() {
  local name=$1 fault=$2; shift 3
  local port=$((30000 + RANDOM % 20000)) rc0=0 rc1=0 t0=$SECONDS
  local a=(--nranks 2 --rendezvous 127.0.0.1:$port --plugin ./libnccl-net-braid.so --timeout 40 --check-all)
  NCCL_SOCKET_IFNAME=vb0,vb1 timeout 150 ./braid-perf "$@" "${a[@]}" --rank 1 >/tmp/$name.r1 2>&1 &
  local p1=$!
  NCCL_SOCKET_IFNAME=va0,va1 timeout 150 ./braid-perf "$@" "${a[@]}" --rank 0 >/tmp/$name.r0 2>&1 &
  local p0=$!
  if [ -n "$fault" ]; then
    for _ in $(seq 600); do grep -q "(elements)" /tmp/$name.r0 && break; kill -0 $p0 2>/dev/null || break; sleep 0.1; done
    sleep 2; sh -c "$fault"
  fi
  wait $p0 || rc0=$?
  wait $p1 || rc1=$?
  grep -E "^ +[0-9]|WARN|ptrSupport|refused" /tmp/$name.r0 /tmp/$name.r1 | cut -c1-300
  local took="$((SECONDS - t0)) s"
  [ $rc0 -eq "${WANT:-0}" ] && [ $rc1 -eq "${WANT:-0}" ] ||
    { tail -n 20 /tmp/$name.r0 /tmp/$name.r1; fail "($name) exits $rc0 $rc1 after $took, want ${WANT:-0}"; }
  [ "${WANT:-0}" = 0 ] || return 0
  grep -q "Out of bounds values : 0 OK" /tmp/$name.r0 || fail "($name) not verified ($took)"
  grep -q "Outputs checked      : [1-9][0-9]* (all ranks; every iteration)" /tmp/$name.r0 ||
    fail "($name) not every iteration checked: $(grep "Outputs checked" /tmp/$name.r0)"
  grep -q "memory: memfd" /tmp/$name.r0 || fail "($name) not in memfd memory"
  echo "verbs-gpu: $name: verified ($took)"
}
# Every registration of both ranks went through the shim (an fd, an offset, the buffer's iova)
# and none failed.
shim_used() {
  local n bad
  n=$(cat /tmp/$1.r0 /tmp/$1.r1 | grep -c "^dmabuf-shim: fd [0-9]* offset [0-9]* length [0-9]* iova 0x[0-9a-f]*: registered$")
  bad=$(cat /tmp/$1.r0 /tmp/$1.r1 | grep "^dmabuf-shim:" | grep -vc ": registered$")
  [ "$n" -ge 4 ] && [ "$bad" = 0 ] || fail "($1) $n registrations through the shim, $bad failed"
  echo "verbs-gpu: $1: $n dma-buf registrations through the shim"
}
WANT=3 run noshim "" -- sendrecv -b 8 -e 8 -w 0 -i 1 --mem memfd
grep -q "ptrSupport 0x1 " /tmp/noshim.r0 || fail "(noshim) ptrSupport not 0x1 on rxe: $(grep -m1 ptrSupport /tmp/noshim.r0)"
grep -q "^braid-perf: rank 0: --mem memfd refused: .*does not advertise NCCL_PTR_DMABUF" /tmp/noshim.r0 ||
  fail "(noshim) the refusal does not name NCCL_PTR_DMABUF"
! grep -q "^dmabuf-shim" /tmp/noshim.r0 || fail "(noshim) the shim was used"
export BRAID_IBVERBS_LIB=$PWD/libbraid-dmabuf-shim.so
run sendrecv "" -- sendrecv -b 8 -e 4M -f 8 -w 1 -i 2 --mem memfd
grep -q "ptrSupport 0x5 " /tmp/sendrecv.r0 || fail "(sendrecv) ptrSupport not 0x5 with the shim: $(grep -m1 ptrSupport /tmp/sendrecv.r0)"
shim_used sendrecv
run allreduce "" -- allreduce --algo ring --proto Simple -b 4K -e 4M -f 32 -w 1 -i 2 --mem memfd
shim_used allreduce
run cut "braid-fabric netem 1 a loss 100%; braid-fabric netem 1 b loss 100%" -- sendrecv --oneway -b 8M -e 8M -w 1 -i 16 --mem memfd
grep -q "verbs rail 1 .*fenced" /tmp/cut.r0 || fail "(cut) rail 1 not fenced"
shim_used cut
braid-fabric clear 1
echo "verbs-gpu: OK"
EOF

VM_TIMEOUT=${VM_TIMEOUT:-240}
vm_run "verbs-gpu test" "$guest_test"
