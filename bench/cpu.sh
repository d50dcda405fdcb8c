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

# cpu_perf ARGS...: braid-perf's "CPU per GB moved" (s), its algbw (GB/s), and the CPU per GB
# of the threads calling the plugin (NCCL's proxy) and of the plugin's own (helper) threads.
cpu_perf() {
  "$PERF" "$@" 2>&1 | awk '/^ +[0-9]/ {a=$6}
    /^# CPU per GB moved/ {c=$7; for (i = 1; i <= NF; i++) {
      if ($i == "proxy") p=$(i+2); if ($i == "other") o=$(i+2) }; sub(/[,)]$/, "", p); sub(/[,)]$/, "", o)}
    END {print c, a, p, o}'
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
  for t in 0 1; do
    read -r c g p o < <(BRAID_SOCKET_THREADS=$t cpu_perf sendrecv --oneway "${BRAID[@]}"); check "${c:-}" braid-perf
    add "braid${t}_oneway" "$c"; add "braid${t}_oneway_gbs" "$g"; add "braid${t}_oneway_proxy" "$p"; add "braid${t}_oneway_other" "$o"
  done
  read -r c g < <(cpu_plain --bidir "${PLAIN[@]}"); check "${c:-}" "tcp_stream --bidir"
  add plain_bidir "$c"; add plain_bidir_gbs "$g"
  for t in 0 1; do
    read -r c g p o < <(BRAID_SOCKET_THREADS=$t cpu_perf sendrecv "${BRAID[@]}"); check "${c:-}" braid-perf
    add "braid${t}_bidir" "$c"; add "braid${t}_bidir_gbs" "$g"; add "braid${t}_bidir_proxy" "$p"; add "braid${t}_bidir_other" "$o"
  done
done

# row LABEL KEY PLAIN: a braid row (median CPU s/GB, GB/s, proxy and helper shares, ratios).
row() {
  printf '%-40s %9s %8s %7s %7s   %sx plain CPU (<= 1.15), %sx plain GB/s  [%s]\n' "$1" "$(m "$2")" \
    "$(m "${2}_gbs")" "$(m "${2}_proxy")" "$(m "${2}_other")" "$(ratio "$(m "$2")" "$(m "$3")")" \
    "$(ratio "$(m "${2}_gbs")" "$(m "${3}_gbs")")" "${vals[$2]}"
}
{
  echo "# CPU per GB moved on loopback, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
  echo "# medians of $rounds interleaved rounds; CPU s per 1e9 payload bytes sent, all processes;"
  echo "# GB/s per direction; proxy / helpers: the CPU per GB of the threads calling the plugin"
  echo "# (NCCL's proxy) and of braid's socket helper threads (BRAID_SOCKET_THREADS); raw values in brackets"
  printf '%-40s %9s %8s %7s %7s   %s\n' "20 x 64 MiB" "CPU s/GB" "GB/s" "proxy" "helpers" "ratios (target)"
  printf '%-40s %9s %8s %7s %7s   [%s]\n' "plain TCP one way (tcp_stream)" "$(m plain_oneway)" "$(m plain_oneway_gbs)" - - "${vals[plain_oneway]}"
  row "braid --oneway, no helper threads" braid0_oneway plain_oneway
  row "braid --oneway, 1 helper per comm" braid1_oneway plain_oneway
  printf '%-40s %9s %8s %7s %7s   [%s]\n' "plain TCP both ways (tcp_stream --bidir)" "$(m plain_bidir)" "$(m plain_bidir_gbs)" - - "${vals[plain_bidir]}"
  row "braid both ways, no helper threads" braid0_bidir plain_bidir
  row "braid both ways, 1 helper per comm" braid1_bidir plain_bidir
} | tee "$out"
echo "# written to $out"
