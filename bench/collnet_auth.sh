#!/usr/bin/env bash
# What braid-ps frame authentication (BRAID_PS_FRAME_AUTH) costs end to end: braid-perf CollNet
# allreduce (chain, one head per node, and CollNetDirect with 2 heads per node; 16 MiB busbw, and
# 8-byte latency) over 2 braid-ps servers on loopback, frame authentication on and off
# alternating within one run, median of ROUNDS rounds each.  Loopback has no wire limit, so this
# is the worst case: the tags' CPU cost is all there is to see (`braid-ps --bench-reduce` prints
# the per-partition cost next to the reduction's).
#   [BUILD=build] bench/collnet_auth.sh [ROUNDS]     (default 5)
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}; R=${1:-5}
export NCCL_NET_PLUGIN=$(realpath $B/libnccl-net-braid.so) BRAID_SOCKET_IFNAME=lo BRAID_PS_TOKEN=measure-$$-$RANDOM
tmp=$(mktemp -d); sp=()
trap 'kill "${sp[@]}" 2>/dev/null; rm -rf $tmp' EXIT
list=""
for i in 0 1; do
  p=$((20000 + RANDOM % 30000))
  $B/braid-ps --listen 127.0.0.1:$p --threads 2 >$tmp/ps$i.log 2>&1 & sp+=($!)
  list+="${list:+,}127.0.0.1:$p"
done
sleep 0.5
export BRAID_PS_SERVERS=$list
run() { # auth args... -> "time_us busbw"
  local a=$1; shift
  BRAID_PS_FRAME_AUTH=$a timeout 300 $B/braid-perf allreduce "$@" 2>&1 | awk '/^ +[0-9]/ {t = $5; b = $7} END {printf "%s %s\n", t, b}'
}
declare -A v
for r in $(seq $R); do
  for a in 1 0; do
    read -r _ b < <(run $a --algo collnet -n 2 -b 16M -e 16M --iters 10 -w 2); v[chain16M_$a]+=" $b"
    read -r _ b < <(run $a --algo CollNetDirect --heads 2 -n 2 -b 16M -e 16M --iters 10 -w 2); v[direct16M_$a]+=" $b"
    read -r t _ < <(run $a --algo collnet -n 2 -b 8 -e 8 --iters 200 -w 20); v[lat8_$a]+=" $t"
  done
done
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf "%-12s %14s %14s %8s   (median of %d alternating rounds; samples on | off)\n" case "auth on" "auth off" on/off $R
for c in chain16M direct16M lat8; do
  on=$(echo "${v[${c}_1]}" | med); off=$(echo "${v[${c}_0]}" | med)
  unit=$([ $c = lat8 ] && echo us || echo GB/s)
  printf "%-12s %10s %-4s %10s %-4s %6.3f   %s |%s\n" $c "$on" $unit "$off" $unit "$(awk -v a=$on -v b=$off 'BEGIN{print (b>0)?a/b:0}')" "${v[${c}_1]}" "${v[${c}_0]}"
done
