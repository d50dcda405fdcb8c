#!/usr/bin/env bash
# CPU per GB moved (issue 22: braid at <= 1.15x the plain TCP program's, large messages), on
# loopback, braid-perf through libnccl-net-braid.so beside bench/ref/tcp_stream.c in the same
# round, interleaved round by round.  Both print the same figure: user + system CPU seconds of
# every process of the run (getrusage RUSAGE_SELF, all threads: the plugin's included), from the
# start of the measured part to its end, both ends summed, over the payload GB (1e9 bytes) sent
# in it by all ends.  Same message shape: 20 messages of 64 MiB after a warm-up, one way and
# both ways (braid-perf sendrecv --oneway / sendrecv over 2 ranks; tcp_stream's phases of 64 MiB,
# each acknowledged, in 1 MiB write()s).  Just measured, nothing tuned.
# Usage: bench/cpu.sh [ROUNDS]   (default 3).  Writes bench/results/cpu-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/stats.sh
rounds=${1:-3}
B=build
PERF=$B/braid-perf
export NCCL_NET_PLUGIN=$PWD/$B/libnccl-net-braid.so BRAID_SOCKET_IFNAME=lo
mkdir -p bench/results
out=bench/results/cpu-$(date +%Y%m%d-%H%M%S).txt

# cpu_perf ARGS...: braid-perf's "CPU per GB moved" (s) and its algbw (GB/s).
cpu_perf() {
  "$PERF" "$@" 2>&1 | awk '/^ +[0-9]/ {a=$6} /^# CPU per GB moved/ {c=$7} END {print c, a}'
}
# cpu_plain ARGS...: tcp_stream's cpu_s_per_GB and gbps_median (per direction).
cpu_plain() {
  "$B/tcp_stream" "$@" | sed -n 's/.* gbps_median=\([0-9.]*\).* cpu_s_per_GB=\([0-9.]*\).*/\2 \1/p'
}
check() { [ -n "$1" ] || { echo "bench/cpu.sh: $2 printed no CPU figure" >&2; exit 1; }; }

PLAIN=(--bytes 64M --repeat 20 --warmup 0.2)
BRAID=(-n 2 -b 64M -e 64M -w 3 --iters 20)
for r in $(seq 1 "$rounds"); do
  echo "# round $r/$rounds" >&2
  read -r c g < <(cpu_plain "${PLAIN[@]}"); check "${c:-}" tcp_stream
  add plain_oneway "$c"; add plain_oneway_gbs "$g"
  read -r c g < <(cpu_perf sendrecv --oneway "${BRAID[@]}"); check "${c:-}" braid-perf
  add braid_oneway "$c"; add braid_oneway_gbs "$g"
  read -r c g < <(cpu_plain --bidir "${PLAIN[@]}"); check "${c:-}" "tcp_stream --bidir"
  add plain_bidir "$c"; add plain_bidir_gbs "$g"
  read -r c g < <(cpu_perf sendrecv "${BRAID[@]}"); check "${c:-}" braid-perf
  add braid_bidir "$c"; add braid_bidir_gbs "$g"
done

{
  echo "# CPU per GB moved on loopback, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
  echo "# medians of $rounds interleaved rounds; CPU s per 1e9 payload bytes sent, all processes;"
  echo "# GB/s per direction for context; raw values in brackets"
  printf '%-40s %9s %8s   %s\n' "20 x 64 MiB" "CPU s/GB" "GB/s" "ratio (target)"
  printf '%-40s %9s %8s   [%s]\n' "plain TCP one way (tcp_stream)" "$(m plain_oneway)" "$(m plain_oneway_gbs)" "${vals[plain_oneway]}"
  printf '%-40s %9s %8s   %sx plain (<= 1.15)  [%s]\n' "braid sendrecv --oneway" "$(m braid_oneway)" "$(m braid_oneway_gbs)" "$(ratio "$(m braid_oneway)" "$(m plain_oneway)")" "${vals[braid_oneway]}"
  printf '%-40s %9s %8s   [%s]\n' "plain TCP both ways (tcp_stream --bidir)" "$(m plain_bidir)" "$(m plain_bidir_gbs)" "${vals[plain_bidir]}"
  printf '%-40s %9s %8s   %sx plain (<= 1.15)  [%s]\n' "braid sendrecv, 2 ranks" "$(m braid_bidir)" "$(m braid_bidir_gbs)" "$(ratio "$(m braid_bidir)" "$(m plain_bidir)")" "${vals[braid_bidir]}"
} | tee "$out"
echo "# written to $out"
