#!/usr/bin/env bash
# braid-perf --mem without a GPU (issue 21), on loopback, seconds:
#   mem_test.sh refuse    --mem cuda and --mem dmabuf with no CUDA driver exit 77 with "no CUDA
#                         GPU here (why)"; --mem udmabuf is refused (exit 3, the property named)
#                         exactly when the plugin's device 0 lacks NCCL_PTR_DMABUF, as its
#                         getProperties reports it (read from braid-perf's header line)
#   mem_test.sh udmabuf   where the plugin advertises NCCL_PTR_DMABUF and /dev/udmabuf exists
#                         (as root: modprobe udmabuf), sendrecv (direct and --staged) and a ring
#                         allreduce in real dma-buf fds, every result checked; else "skip" with
#                         the reason
# test/gpu/check.sh covers the GPU side.   BUILD=build tools/perf/test/mem_test.sh refuse
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 2
B=${BUILD:-build}
PERF=${PERF:-$B/braid-perf}
PLUGIN=${PLUGIN:-$(realpath "$B/libnccl-net-braid.so")}
export BRAID_SOCKET_IFNAME=${BRAID_SOCKET_IFNAME:-lo}
mode=${1:-refuse}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; grep -v "NCCL INFO" "$tmp/out" | tail -n 8 | sed 's/^/     /'; }
perf() { rc=0; timeout 120 "$PERF" --plugin "$PLUGIN" --timeout 30 "$@" >"$tmp/out" 2>&1 || rc=$?; }

# The plugin's ptrSupport for device 0, from a host-memory run's header line.
perf sendrecv -n 2 -b 8 -e 8 -w 0 -i 1
ptr=$(grep -o "ptrSupport 0x[0-9a-f]*" "$tmp/out" | head -n 1 | awk '{print $2}')
if [ $rc -ne 0 ] || [ -z "$ptr" ]; then bad "host run (exit $rc, ptrSupport '${ptr}')"; echo "mem: $pass passed, $fail failed"; exit 1; fi
echo "plugin device 0: ptrSupport $ptr"

driver_present() { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && return 0
  local d; for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }}; do [ -e "$d/libcuda.so.1" ] && return 0; done; return 1; }

case $mode in
refuse)
  if driver_present; then
    echo "skip mem-no-driver (libcuda.so.1 is installed here: test/gpu/check.sh runs --mem cuda/dmabuf)"
  else
    for m in cuda dmabuf; do
      for args in "sendrecv -n 2" "allreduce -n 3 --algo tree"; do
        perf $args -b 1K -e 64K --mem $m
        if [ $rc -ne 77 ]; then bad "--mem $m $args without a driver (exit $rc, want 77)"
        elif ! grep -q "^braid-perf: --mem $m: no CUDA GPU here (libcuda.so.1 cannot be loaded (.*): no NVIDIA driver)$" "$tmp/out"; then
          bad "--mem $m $args without a driver (exit 77 without the message)"
        else ok "--mem $m $args without a driver: exit 77, $(grep -m1 "^braid-perf: --mem" "$tmp/out")"; fi
      done
    done
  fi
  perf sendrecv -n 2 -b 1K -e 64K --mem udmabuf
  if (( ptr & 0x4 )); then
    if [ $rc -eq 3 ]; then bad "--mem udmabuf refused though ptrSupport $ptr has NCCL_PTR_DMABUF"
    else ok "--mem udmabuf not refused (ptrSupport $ptr has NCCL_PTR_DMABUF; exit $rc: mem_test.sh udmabuf runs it)"; fi
  elif [ $rc -ne 3 ]; then bad "--mem udmabuf with ptrSupport $ptr (exit $rc, want 3: refused)"
  elif ! grep -q "^braid-perf: rank 0: --mem udmabuf refused: .*ptrSupport $ptr) does not advertise NCCL_PTR_DMABUF in ptrSupport" "$tmp/out"; then
    bad "--mem udmabuf with ptrSupport $ptr (exit 3 without naming NCCL_PTR_DMABUF)"
  else ok "--mem udmabuf refused: ptrSupport $ptr lacks NCCL_PTR_DMABUF (exit 3)"; fi
  perf sendrecv -n 2 -b 8 -e 8 --mem gpu
  if [ $rc -eq 2 ] && grep -q "bad --mem" "$tmp/out"; then ok "--mem gpu: a bad value, exit 2"
  else bad "--mem gpu (exit $rc, want 2 with \"bad --mem\")"; fi
  ;;
udmabuf)
  if ! (( ptr & 0x4 )); then
    echo "skip udmabuf-loopback (the plugin's ptrSupport $ptr lacks NCCL_PTR_DMABUF: mem_test.sh refuse checks the refusal)"
  else
    [ -e /dev/udmabuf ] || [ "$(id -u)" != 0 ] || modprobe udmabuf 2>"$tmp/modprobe" || true
    if [ ! -e /dev/udmabuf ]; then
      why=$( [ "$(id -u)" = 0 ] && head -c 160 "$tmp/modprobe" 2>/dev/null || echo "not root: cannot modprobe udmabuf")
      echo "skip udmabuf-loopback (no /dev/udmabuf on kernel $(uname -r): ${why:-modprobe udmabuf made none})"
    else
      for args in "sendrecv -n 2 -b 8 -e 4M -f 8 --proto Simple" "sendrecv -n 2 -b 8 -e 4M -f 8 --proto Simple --staged" \
                  "allreduce -n 3 -b 1K -e 4M -f 16 --proto Simple --check-all" "sendrecv -n 2 -b 8 -e 1M -f 4"; do
        perf $args --mem udmabuf
        if [ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/out" && grep -q "memory: udmabuf" "$tmp/out"; then
          ok "--mem udmabuf $args"
        else bad "--mem udmabuf $args (exit $rc)"; fi
      done
    fi
  fi
  ;;
*) echo "usage: mem_test.sh refuse|udmabuf" >&2; exit 2;;
esac
echo "mem: $pass passed, $fail failed"
[ $fail -eq 0 ]
