#!/bin/sh
# braid-perf smoke matrix: every op, algorithm and protocol over the braid plugin on loopback,
# every result verified (braid-perf exits non-zero on any wrong element or plugin error); then
# the same ops through chaos-net (NULL requests, delayed completions) when it has been built.
set -u
B=${BUILD:-build}
PERF=$B/braid-perf
PLUGIN=$(cd "$B" && pwd)/libnccl-net-braid.so
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
fail=0
run() {
  if out=$("$PERF" "$@" --timeout 30 -w 1 -i 3 2>&1); then
    echo "ok   $*"
  else
    echo "FAIL $*"
    echo "$out" | tail -15
    fail=1
  fi
}
P="--plugin $PLUGIN"
run sendrecv -n 2 -b 0 -e 16M -f 8 $P
run sendrecv --oneway -n 2 -b 0 -e 16M -f 8 $P
run sendrecv -n 1 -b 0 -e 1M -f 32 $P
run sendrecv -n 3 -b 1 -e 5M -f 7 -c 4 $P --proto LL128
run allreduce --algo ring -n 3 -b 0 -e 16M -f 8 $P
run allreduce --algo ring -n 4 -b 3 -e 4M -f 9 -d int32 -o prod $P --proto LL
run allreduce --algo ring -n 2 -b 3 -e 4M -f 9 -d double -o max $P --net-version 7
run allreduce --algo tree -n 4 -b 0 -e 16M -f 8 $P
run allreduce --algo tree -n 5 -b 4 -e 4M -f 9 -d int64 -o min -c 4 $P --net-version 10
run allgather -n 3 -b 0 -e 16M -f 8 $P
run reducescatter -n 3 -b 0 -e 16M -f 8 $P
if [ -f "$B/libnccl-net-chaos.so" ]; then
  export CHAOS_INNER=$PLUGIN
  C="--plugin $(cd "$B" && pwd)/libnccl-net-chaos.so"
  run sendrecv -n 3 -b 0 -e 4M -f 8 $C
  run allreduce -n 3 -b 0 -e 4M -f 8 $C
  run allreduce --algo tree -n 5 -b 0 -e 4M -f 8 $C
  run reducescatter -n 4 -b 0 -e 4M -f 8 $C
fi
exit $fail
