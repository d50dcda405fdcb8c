#!/usr/bin/env bash
# Scaling of the socket transport's helper threads (issue 22 item 5): ONE connection (one channel,
# sendrecv --oneway 64 MiB on loopback) held to 0, 1, 2, ... helper threads per comm
# (BRAID_SOCKET_THREADS=T; a stream per helper, BRAID_NSTREAMS left unset), interleaved round by
# round beside the plain TCP program (bench/ref/tcp_stream.c, one connection, blocking).  For each
# T: throughput, CPU per GB moved (both ends, every thread), the part of it on the threads that
# call the plugin (NCCL's proxy) and on the helpers, and how busy one helper thread is (fraction
# of a core).  Then what the measured CPU per byte means for a 100 and a 400 Gbit/s NIC: the
# cores one end needs to move that many bytes.
# Usage: bench/threads.sh [ROUNDS] [MAX_THREADS]   (defaults 3 and 4).  Writes
# bench/results/threads-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/stats.sh
rounds=${1:-3}
maxt=${2:-4}
B=build
PERF=$B/braid-perf
export NCCL_NET_PLUGIN=$PWD/$B/libnccl-net-braid.so BRAID_SOCKET_IFNAME=lo
unset BRAID_NSTREAMS
mkdir -p bench/results
out=bench/results/threads-$(date +%Y%m%d-%H%M%S).txt
ts="0"
for ((t = 1; t <= maxt; t *= 2)); do ts+=" $t"; done

# perf_cpu T: "algbw total_cpu_per_GB proxy_per_GB other_per_GB" of braid-perf with T helpers.
perf_cpu() {
  BRAID_SOCKET_THREADS=$1 "$PERF" sendrecv --oneway -c 1 -n 2 -b 64M -e 64M -w 3 --iters 20 2>&1 |
    awk '/^ +[0-9]/ {a=$6}
         /^# CPU per GB moved/ {c=$7; for (i = 1; i <= NF; i++) {
           if ($i == "proxy") p=$(i+2); if ($i == "other") o=$(i+2) }; sub(/[,)]$/, "", p); sub(/[,)]$/, "", o)}
         END {print a, c, p, o}'
}

for r in $(seq 1 "$rounds"); do
  echo "# round $r/$rounds" >&2
  read -r c g < <("$B/tcp_stream" --bytes 64M --repeat 20 --warmup 0.2 |
    sed -n 's/.* gbps_median=\([0-9.]*\).* cpu_s_per_GB=\([0-9.]*\).*/\2 \1/p')
  [ -n "${c:-}" ] || { echo "bench/threads.sh: tcp_stream printed no figure" >&2; exit 1; }
  add plain_gbs "$g"; add plain_cpu "$c"
  for t in $ts; do
    read -r a c p o < <(perf_cpu "$t")
    [ -n "${o:-}" ] || { echo "bench/threads.sh: braid-perf (threads $t) printed no CPU figure" >&2; exit 1; }
    add "gbs_$t" "$a"; add "cpu_$t" "$c"; add "proxy_$t" "$p"; add "other_$t" "$o"
  done
done

{
  echo "# one connection, sendrecv --oneway 64 MiB on loopback: helper threads per comm"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r); medians of $rounds interleaved rounds"
  echo "# CPU: s per GB (1e9 bytes) moved, both ends, all threads; proxy: the threads calling the"
  echo "# plugin (NCCL's proxy); helpers: braid's socket threads; busy: one helper's share of a core"
  printf '%-26s %8s %9s %9s %9s %7s  %s\n' "threads per comm" "GB/s" "CPU s/GB" "proxy" "helpers" "busy" "vs plain (GB/s, CPU)"
  printf '%-26s %8s %9s %9s %9s %7s  [%s]\n' "plain TCP (tcp_stream)" "$(m plain_gbs)" "$(m plain_cpu)" "-" "-" "-" "${vals[plain_gbs]}"
  for t in $ts; do
    busy=$(awk -v o="$(m "other_$t")" -v g="$(m "gbs_$t")" -v t="$t" 'BEGIN {printf "%.2f", t ? o * g / (2 * t) : 0}')
    printf '%-26s %8s %9s %9s %9s %7s  %sx, %sx  [%s]\n' "braid, $t" "$(m "gbs_$t")" "$(m "cpu_$t")" \
      "$(m "proxy_$t")" "$(m "other_$t")" "$([ "$t" = 0 ] && echo - || echo "$busy")" \
      "$(ratio "$(m "gbs_$t")" "$(m plain_gbs)")" "$(ratio "$(m "cpu_$t")" "$(m plain_cpu)")" "${vals[gbs_$t]}"
  done
  # Cores per end for a NIC of N Gbit/s: (CPU s per GB, per end) x (GB/s).  One end's CPU is half
  # of both ends' (sender and receiver cost about the same on loopback: docs/performance.md).
  echo "# cores one end needs at line rate, from the measured CPU per GB (half of both ends'):"
  for t in $ts; do
    awk -v c="$(m "cpu_$t")" -v h="$(m "other_$t")" -v t="$t" 'BEGIN {
      printf "#   threads %d: 100 Gbit/s %.1f cores, 400 Gbit/s %.1f cores (helpers alone: %.1f, %.1f)\n",
        t, c / 2 * 12.5, c / 2 * 50, h / 2 * 12.5, h / 2 * 50 }'
  done
  awk -v c="$(m plain_cpu)" 'BEGIN {
    printf "#   plain TCP: 100 Gbit/s %.1f cores, 400 Gbit/s %.1f cores\n", c / 2 * 12.5, c / 2 * 50 }'
} | tee "$out"
echo "# written to $out"
