#!/usr/bin/env bash
# Multi-rail figures on the netbed (root): 2 hosts x 4 rails shaped to RATE (default 500mbit),
# braid-perf sendrecv --oneway 64 MiB from host 0 to host 1, side by side in the same run with
#   - four parallel iperf3 streams, one per rail (what the fabric carries);
#   - the same with one rail shaped to a tenth (50mbit), and braid with BRAID_STRIPING=equal;
#   - a fault sequence during one long run (a rail cut, restored; a rail black-holed, restored;
#     a rail degraded, restored) with per-rail throughput sampled from BRAID_METRICS_FILE every
#     100 ms: recovery times, and a PNG plot (bench/results/multirail-timeline.png) when gnuplot
#     is installed (apt-get install gnuplot-nox).
# Usage: bench/multirail.sh [ROUNDS]   (default 3).  Writes bench/results/multirail-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/stats.sh
rounds=${1:-3}
RATE=${RATE:-500mbit}
NB=test/netbed/netbed.sh
P=bm$$
[ "$(id -u)" = 0 ] || { echo "multirail: needs root (network namespaces)"; exit 1; }
mkdir -p bench/results
out=bench/results/multirail-$(date +%Y%m%d-%H%M%S).txt
tmp=$(mktemp -d)
trap '$NB --prefix $P down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
$NB --prefix $P up --hosts 2 --rails 4 --rate "$RATE" >/dev/null
PERF=$(realpath build/braid-perf)
export NCCL_NET_PLUGIN=$(realpath build/libnccl-net-braid.so) BRAID_SOCKET_IFNAME=eth

# braid ARGS...: a 2-rank oneway run; prints Gbit/s of the last table row.
braid() {
  local port=$((30000 + RANDOM % 20000))
  local args=(sendrecv --oneway -b 64M -e 64M --nranks 2 --rendezvous 10.77.0.1:$port "$@")
  $NB --prefix $P exec 1 "$PERF" "${args[@]}" --rank 1 >"$tmp/r1" 2>&1 &
  local p1=$!
  $NB --prefix $P exec 0 "$PERF" "${args[@]}" --rank 0 >"$tmp/r0" 2>&1 || { cat "$tmp/r0" >&2; wait $p1; return 1; }
  wait $p1
  awk '/^ +[0-9]/ {g = $6 * 8} END {printf "%.3f", g}' "$tmp/r0"
}
iperf_total() { $NB --prefix $P iperf-all 0 1 3 | awk '/^total/ {printf "%.3f", $2 / 1000}'; }

for r in $(seq 1 "$rounds"); do
  echo "# round $r/$rounds" >&2
  add iperf "$(iperf_total)"
  add braid "$(braid -w 2 --iters 10)"
  $NB --prefix $P shape 0 3 50mbit >/dev/null
  add iperf_slow "$(iperf_total)"
  add braid_slow "$(braid -w 2 --iters 10)"
  add equal_slow "$(BRAID_STRIPING=equal braid -w 1 --iters 2)"
  $NB --prefix $P restore 0 3 >/dev/null
done

# Fault timeline: cut rail 1 at 3 s (restore 6 s), black-hole rail 1 at 9 s (restore 12 s),
# degrade rail 2 to a tenth at 15 s (restore 18 s).  Over ofi a failed rail stays down for the
# connection's life (no rejoin), so the black hole gets a run of its own (at 3 s) there.
# timeline NAME FAULTS: one long run with BRAID_METRICS_FILE sampled; per-100-ms totals into
# $tmp/total-NAME, per-rail rates into $tmp/rates-NAME, events into $tmp/events-NAME.
timeline() {
  local name=$1 faults=$2 metrics=$tmp/metrics-$1.prom
  rm -f "$tmp/done"
  (
    t0=$(date +%s.%N)
    while [ ! -f "$tmp/done" ]; do
      # the writer's own timestamp, so a sample that catches two rewrites (or none) is exact
      [ -f "$metrics" ] && awk -v t0="$t0" '/^braid_metrics_time_seconds/ {t = $NF - t0}
        /^braid_rail_bytes_total/ { match($0, /rail="[0-9]+"/)
          print t, substr($0, RSTART + 6, RLENGTH - 7), $NF }' "$metrics"
      sleep 0.05
    done
  ) | awk '!seen[$1 " " $2]++' >"$tmp/samples-$name" &
  local sampler=$!
  bash -c "$faults" &
  local fpid=$!
  BRAID_METRICS_FILE=$metrics BRAID_METRICS_INTERVAL_MS=100 NCCL_DEBUG=WARN \
    braid -w 0 --iters 75 -c 1 >/dev/null || true
  touch "$tmp/done"
  wait $fpid $sampler 2>/dev/null || true
  grep -q "Out of bounds values : 0 OK" "$tmp/r0" && echo yes >"$tmp/ok-$name" || echo no >"$tmp/ok-$name"
  grep "NET/braid" "$tmp/r0" | sed 's/.*NET\/braid : //' >"$tmp/events-$name"
  # Per-rail Mbit/s in 100 ms steps, from consecutive samples.
  awk '{ if (last[$2] != "") { dt = $1 - lt[$2]; if (dt > 0) printf "%.2f %s %.1f\n", $1, $2, ($3 - last[$2]) * 8 / dt / 1e6 }
         last[$2] = $3; lt[$2] = $1 }' "$tmp/samples-$name" >"$tmp/rates-$name"
  awk '{ t = sprintf("%.1f", $1); sum[t] += $3; if (!(t in seen)) { seen[t] = 1; order[n++] = t } }
       END { for (i = 0; i < n; i++) print order[i], sum[order[i]] }' "$tmp/rates-$name" >"$tmp/total-$name"
}
F="NB='$NB'; P='$P'"
if [ "${BRAID_TRANSPORT:-}" = ofi ]; then
  timeline main "$F; sleep 3; \$NB --prefix \$P cut 0 1 >/dev/null; sleep 3; \$NB --prefix \$P restore 0 1 >/dev/null
    sleep 9; \$NB --prefix \$P shape 0 2 50mbit >/dev/null; sleep 3; \$NB --prefix \$P restore 0 2 >/dev/null"
  timeline hole "$F; sleep 3; \$NB --prefix \$P blackhole 0 1 >/dev/null; sleep 3; \$NB --prefix \$P restore 0 1 >/dev/null"
  hole_name=hole hole_at=3
else
  timeline main "$F; sleep 3; \$NB --prefix \$P cut 0 1 >/dev/null; sleep 3; \$NB --prefix \$P restore 0 1 >/dev/null
    sleep 3; \$NB --prefix \$P blackhole 0 1 >/dev/null; sleep 3; \$NB --prefix \$P restore 0 1 >/dev/null
    sleep 3; \$NB --prefix \$P shape 0 2 50mbit >/dev/null; sleep 3; \$NB --prefix \$P restore 0 2 >/dev/null"
  hole_name=main hole_at=9
fi
timeline_ok=$(cat "$tmp/ok-main")
[ "$hole_name" = main ] || timeline_ok="$timeline_ok, black-hole run: $(cat "$tmp/ok-$hole_name")"
cp "$tmp/rates-main" "$tmp/rates"
# Recovery: from the fault to the end of the last 100 ms step, within 2 s, whose total is below
# 90% of three rails' iperf3 rate (0 when the survivors never dipped).
three=$(echo "${vals[iperf]}" | awk '{s = 0; for (i = 1; i <= NF; i++) s += $i; print s / NF * 750}')
recover() { awk -v f="$1" -v th="$(echo "$three * 0.9" | bc)" '
  $1 > f && $1 <= f + 2 && $2 < th { last = $1 }
  END { printf "%.1f", (last ? last + 0.1 - f : 0) }' "$tmp/total-$2"; }

{
  echo "# braid multi-rail on the netbed, $(date -u +%Y-%m-%dT%H:%MZ): 2 hosts x 4 rails at $RATE (tbf), $(nproc) cores, BRAID_TRANSPORT=${BRAID_TRANSPORT:-auto}${FI_PROVIDER:+ FI_PROVIDER=$FI_PROVIDER}"
  echo "# medians of $rounds interleaved rounds; Gbit/s; raw values in brackets"
  printf '%-48s %7s   %s\n' "4 x iperf3, one stream per rail" "$(m iperf)" "[${vals[iperf]}]"
  printf '%-48s %7s   %sx iperf3 (>= 0.95)  [%s]\n' "braid sendrecv --oneway 64M" "$(m braid)" "$(ratio "$(m braid)" "$(m iperf)")" "${vals[braid]}"
  printf '%-48s %7s   [%s]\n' "4 x iperf3, rail 3 at 50mbit" "$(m iperf_slow)" "${vals[iperf_slow]}"
  printf '%-48s %7s   %sx iperf3 (>= 0.90)  [%s]\n' "braid, rail 3 at 50mbit" "$(m braid_slow)" "$(ratio "$(m braid_slow)" "$(m iperf_slow)")" "${vals[braid_slow]}"
  printf '%-48s %7s   %sx iperf3  [%s]\n' "braid BRAID_STRIPING=equal, rail 3 at 50mbit" "$(m equal_slow)" "$(ratio "$(m equal_slow)" "$(m iperf_slow)")" "${vals[equal_slow]}"
  echo "# fault timeline (one run of 75 x 64 MiB, every iteration verified: $timeline_ok)"
  printf '%-48s %7s s\n' "back to 90% of 3 rails after rail 1 cut (3 s)" "$(recover 3 main)"
  printf '%-48s %7s s\n' "back to 90% of 3 rails after black hole ($hole_at s)" "$(recover $hole_at $hole_name)"
  echo "# rail events logged by the sender:"
  { cat "$tmp/events-main"; [ "$hole_name" = main ] || cat "$tmp/events-$hole_name"; } | sed 's/^/#   /' | head -24
} | tee "$out"
# One row per sample time: t, then Mbit/s of rails 0..3.
awk '{ t = $1; if (!(t in seen)) { seen[t] = 1; order[n++] = t } v[t, $2] = $3 }
     END { for (i = 0; i < n; i++) { t = order[i]; printf "%s", t
             for (r = 0; r < 4; r++) printf " %s", ((t, r) in v ? v[t, r] : "nan"); print "" } }' \
  "$tmp/rates" >bench/results/multirail-timeline.dat
if command -v gnuplot >/dev/null; then
  gnuplot <<EOF
set terminal pngcairo size 1000,500 font ",10"
set output "bench/results/multirail-timeline.png"
set title "braid: per-rail throughput, 2 hosts x 4 rails at $RATE (cut, black hole, degrade, each restored)"
set xlabel "time (s)"; set ylabel "Mbit/s"; set key outside right; set grid; set yrange [0:650]
set arrow from 3,graph 0 to 3,graph 1 nohead dt 2; set label "cut rail 1" at 3.1,graph 0.97
set arrow from 6,graph 0 to 6,graph 1 nohead dt 3; set label "restore" at 6.1,graph 0.9
set arrow from 9,graph 0 to 9,graph 1 nohead dt 2; set label "black-hole rail 1" at 9.1,graph 0.97
set arrow from 12,graph 0 to 12,graph 1 nohead dt 3; set label "restore" at 12.1,graph 0.9
set arrow from 15,graph 0 to 15,graph 1 nohead dt 2; set label "rail 2 to 50mbit" at 15.1,graph 0.97
set arrow from 18,graph 0 to 18,graph 1 nohead dt 3; set label "restore" at 18.1,graph 0.9
plot for [r=0:3] "bench/results/multirail-timeline.dat" using 1:(column(r + 2)) with lines lw 2 title sprintf("rail %d", r)
EOF
  echo "# plot: bench/results/multirail-timeline.png"
fi
echo "# written to $out"
