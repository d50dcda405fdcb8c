#!/usr/bin/env bash
# GPU memory on the wire (issue 21), for a machine with an NVIDIA GPU: one run, a few minutes.
#   test/gpu/check.sh            (BUILD=build; JOBS=make's jobs, default the CPU count)
# Builds braid-perf, the net plugin and a probe of common/cuda.h; prints the GPU and driver; then
#   1. the probe: driver, GPUs, cuMemAlloc, pointer queries (device and host memory), a copy
#      there and back, dma-buf export (cuMemGetHandleForAddressRange)
#   2. braid-perf --mem cuda and --mem dmabuf, two ranks on loopback over TCP sockets: CUDA comes
#      up (not exit 77), then the run passes when the plugin's ptrSupport advertises the memory,
#      and is refused (exit 3, the property named) when it does not
#   3. with an RDMA NIC (/sys/class/infiniband): BRAID_TRANSPORT=verbs, --mem host, cuda and
#      dmabuf, two ranks through the NIC: real GPUDirect when ptrSupport advertises it
# One PASS/FAIL (or SKIP with the reason) line per step, a summary, exit 1 on a FAIL; exit 77
# with "no GPU" where there is none.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pass=0 fail=0 skip=0
say() { printf '%s %s\n' "$1" "$2"; case $1 in PASS) pass=$((pass + 1));; FAIL) fail=$((fail + 1));; SKIP) skip=$((skip + 1));; esac; }
show() { grep -v "NCCL INFO" "$1" | tail -n 12 | sed 's/^/     /'; }

# No GPU: say so before building anything.
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && [ ! -e /proc/driver/nvidia/version ]; then
  echo "test/gpu/check.sh: no GPU (no NVIDIA driver: libcuda.so.1 is not installed, no /proc/driver/nvidia)"
  exit 77
fi

t0=$SECONDS
echo "== build"
if ! make -j"$JOBS" BUILD="$B" "$B/braid-perf" "$B/libnccl-net-braid.so" >"$out/build.log" 2>&1; then
  say FAIL "build (make $B/braid-perf $B/libnccl-net-braid.so)"; show "$out/build.log"; exit 1
fi
mkdir -p "$B/gpu"
if ! cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -iquote common test/gpu/cuda_probe.c \
     common/cuda.c common/dynlib.c -ldl -lpthread -o "$B/gpu/cuda-probe" >"$out/probe-build.log" 2>&1; then
  say FAIL "build the probe (test/gpu/cuda_probe.c)"; show "$out/probe-build.log"; exit 1
fi
say PASS "build ($((SECONDS - t0)) s)"

echo "== GPU and driver"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,memory.total --format=csv,noheader 2>&1 | sed 's/^/  /'
[ -r /proc/driver/nvidia/version ] && head -n 1 /proc/driver/nvidia/version | sed 's/^/  /'
for m in nvidia_peermem nv_peer_mem; do [ -e /sys/module/$m ] && echo "  kernel module $m loaded (GPUDirect RDMA through regMr NCCL_PTR_CUDA)"; done

echo "== probe (common/cuda.h)"
rc=0; "$B/gpu/cuda-probe" >"$out/probe" 2>&1 || rc=$?
sed 's/^/  /' "$out/probe"
if [ $rc -eq 77 ]; then echo "test/gpu/check.sh: no GPU ($(grep -m1 '^no GPU' "$out/probe"))"; exit 77; fi
[ $rc -eq 0 ] && say PASS "probe: $(grep -c '^PASS' "$out/probe") steps" || say FAIL "probe: $(grep -c '^FAIL' "$out/probe") failed steps (above)"

PLUGIN=$(realpath "$B/libnccl-net-braid.so")
# run NAME MEM ARGS...: one braid-perf run; judged against the plugin's ptrSupport (from a host run).
ptr_of() { grep -o "ptrSupport 0x[0-9a-f]*" "$1" | head -n 1 | awk '{print $2}'; }
run() {
  local name=$1 mem=$2 rc=0; shift 2
  timeout 180 "$B/braid-perf" --plugin "$PLUGIN" --timeout 60 "$@" --mem "$mem" >"$out/run" 2>&1 || rc=$?
  local need=0x0 prop=
  case $mem in cuda) need=0x2 prop=NCCL_PTR_CUDA;; dmabuf) need=0x4 prop=NCCL_PTR_DMABUF;; esac
  if [ $rc -eq 77 ]; then say FAIL "$name: exit 77, CUDA did not come up: $(grep -m1 'braid-perf' "$out/run")"
  elif (( PTR & need )) || [ "$mem" = host ]; then
    if [ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$out/run"; then
      say PASS "$name: every result right ($(grep -m1 -o 'iflush called after [0-9]* Simple receives[^(]*' "$out/run" || echo "host memory"))"
    else say FAIL "$name: exit $rc"; show "$out/run"; fi
  elif [ $rc -eq 3 ] && grep -q "does not advertise $prop in ptrSupport" "$out/run"; then
    say PASS "$name: refused as ptrSupport $PTR says (no $prop; GPU data not on the wire here)"
  else say FAIL "$name: ptrSupport $PTR lacks $prop, want exit 3 naming it, got exit $rc"; show "$out/run"; fi
}
# suite LABEL: host, cuda and dmabuf runs under the current BRAID_* environment.
suite() {
  local label=$1 rc=0
  timeout 120 "$B/braid-perf" --plugin "$PLUGIN" --timeout 60 sendrecv -n 2 -b 8 -e 8 -w 0 -i 1 >"$out/host" 2>&1 || rc=$?
  PTR=$(ptr_of "$out/host")
  if [ $rc -ne 0 ] || [ -z "$PTR" ]; then say FAIL "$label: host-memory run (exit $rc)"; show "$out/host"; return; fi
  echo "  $label: plugin device 0 ptrSupport $PTR"
  run "$label sendrecv --mem host" host sendrecv -n 2 -b 8 -e 16M -f 8
  for mem in cuda dmabuf; do
    run "$label sendrecv --mem $mem" $mem sendrecv -n 2 -b 8 -e 16M -f 8 --check-all
    run "$label sendrecv --staged --mem $mem" $mem sendrecv -n 2 -b 8 -e 16M -f 8 --staged --proto Simple
    run "$label allreduce ring Simple --mem $mem" $mem allreduce -n 2 -b 1K -e 16M -f 16 --proto Simple --check-all
  done
}

echo "== braid-perf on loopback, TCP sockets"
BRAID_TRANSPORT=socket BRAID_SOCKET_IFNAME=lo suite "socket/lo"

echo "== braid-perf over an RDMA NIC, verbs"
if [ -d /sys/class/infiniband ] && [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  echo "  RDMA devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
  command -v ibv_devices >/dev/null && ibv_devices 2>&1 | sed 's/^/  /'
  BRAID_TRANSPORT=verbs suite "verbs"
else
  say SKIP "verbs (no RDMA NIC: /sys/class/infiniband is empty or missing)"
fi

echo "== $pass passed, $fail failed, $skip skipped ($((SECONDS - t0)) s)"
[ $fail -eq 0 ]
