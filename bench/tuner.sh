#!/usr/bin/env bash
# Tuner figures on the netbed (root): 4 GPU hosts with RAILS NICs each (default 1), every NIC
# shaped to RATE (default 500mbit), and 4 braid-ps hosts (a server on each NIC), so ring, tree and
# CollNet are all available. Steps:
#   1. calibrate on the healthy fabric: braid-perf --calibrate (ring/tree x LL/LL128/Simple,
#      CollNet), the same file for every rank;
#   2. healthy sweep 4 KiB .. 256 MiB (x4), interleaved repeats: each repeat runs every fixed
#      algorithm (ring, tree, collnet), NCCL's own model choice (--algo nccl) and the braid tuner's
#      (--algo auto) once, in turn;
#   3. host 0's NICs shaped to RATE/4: a short run writes each rank's advice (BRAID_TUNER_ADVICE),
#      braid-tune health merges it into one health file, then the same sweep with it.
# Per size: auto's time against the best fixed algorithm's (ratio best/auto; target >= 0.95 where
# the repeats separate the algorithms, i.e. the best one's slowest repeat beats the runner-up's
# fastest) and against NCCL's own model's choice (target >= 1.0, within noise).
# Usage: [RATE=500mbit] [RAILS=1] [REPEATS=3] bench/tuner.sh   Writes bench/results/tuner-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-500mbit}
RAILS=${RAILS:-1}
REPEATS=${REPEATS:-3}
CHANNELS=${CHANNELS:-4}
NB=test/netbed/netbed.sh
P=bt$$
[ "$(id -u)" = 0 ] || { echo "tuner bench: needs root (network namespaces)"; exit 1; }
mkdir -p bench/results
out=bench/results/tuner-$(date +%Y%m%d-%H%M%S).txt
raw=${out%.txt}-raw
mkdir -p "$raw"
tmp=$(mktemp -d)
spids=()
cleanup() { kill "${spids[@]}" 2>/dev/null; $NB --prefix $P down >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
$NB --prefix $P up --hosts 8 --rails "$RAILS" --rate "$RATE" >/dev/null
PERF=$(realpath build/braid-perf)
PS=$(realpath build/braid-ps)
TUNE=$(realpath build/braid-tune)
export NCCL_NET_PLUGIN=$(realpath build/libnccl-net-braid.so) BRAID_SOCKET_IFNAME=eth
export NCCL_TUNER_PLUGIN=$(realpath build/libnccl-tuner-braid.so)
export BRAID_PS_TOKEN=bench-$$-$RANDOM
addr() { echo "10.77.${2:-0}.$(($1 + 1))"; }

list=""
for h in 4 5 6 7; do
  for r in $(seq 0 $((RAILS - 1))); do
    $NB --prefix $P exec "$h" "$PS" --listen "$(addr "$h" "$r"):7000" --threads 1 >"$tmp/ps-$h-$r.log" 2>&1 &
    spids+=($!)
    list+="${list:+,}$(addr "$h" "$r"):7000"
  done
done
sleep 0.5
export BRAID_PS_SERVERS=$list

# run OUT ARGS...: allreduce on hosts 0-3 (each its own NCCL_HOSTID); rank 0's output to OUT.
run() {
  local o=$1; shift
  local port=$((30000 + RANDOM % 20000)) pids=()
  local args=(allreduce --channels "$CHANNELS" --nranks 4 --rendezvous "$(addr 0):$port" "$@")
  for r in 3 2 1; do
    NCCL_HOSTID=h$r $NB --prefix $P exec "$r" "$PERF" "${args[@]}" --rank "$r" >"$tmp/r$r" 2>&1 &
    pids+=($!)
  done
  if ! NCCL_HOSTID=h0 $NB --prefix $P exec 0 "$PERF" "${args[@]}" --rank 0 >"$o" 2>&1; then
    echo "run failed: ${args[*]}" >&2; tail -n 20 "$o" >&2; wait "${pids[@]}" || true
    local keep=bench/results/tuner-failed-$(date +%H%M%S)
    mkdir -p "$keep"; cp "$o" "$keep/r0"; cp "$tmp"/r[123] "$keep/"; echo "logs kept in $keep" >&2
    return 1
  fi
  wait "${pids[@]}"
}
# sweep TAG: every algorithm over both size segments, REPEATS times, interleaved.
sweep() {
  local tag=$1
  for rep in $(seq 1 "$REPEATS"); do
    for algo in ring tree collnet nccl auto; do
      echo "# $tag repeat $rep/$REPEATS: $algo" >&2
      run "$tmp/$tag-$algo-$rep-s" --algo "$algo" -b 4K -e 1M -f 4 -w 3 --iters 20
      run "$tmp/$tag-$algo-$rep-l" --algo "$algo" -b 4M -e 256M -f 4 -w 1 --iters 2
    done
  done
}

echo "# calibrating on the healthy fabric" >&2
cal=$tmp/calibration
# Two segments, as the sweeps: many iterations where times are short and noisy, few where long.
run "$tmp/calib-s.out" --calibrate "$cal.s" -b 4K -e 1M -f 4 -w 3 --iters 20
run "$tmp/calib-l.out" --calibrate "$cal.l" -b 4M -e 64M -f 4 -w 1 --iters 2
{ cat "$cal.l"; grep '^allreduce ' "$cal.s"; } >"$cal"
export BRAID_TUNER_CALIB=$cal
export "$("$TUNE" pin 2>/dev/null)"  # the tuner uses files only when pinned
sweep healthy
cp "$cal" "$raw/calibration"

slow=$(awk -v r="${RATE%mbit}" 'BEGIN {printf "%dmbit", r / 4}')
for r in $(seq 0 $((RAILS - 1))); do $NB --prefix $P shape 0 "$r" "$slow" >/dev/null; done
echo "# host 0 at $slow per NIC: collecting advice" >&2
mkdir -p "$tmp/advice"
BRAID_TUNER_ADVICE=$tmp/advice/%h.%p BRAID_TUNER_ADVICE_INTERVAL_MS=500 \
  run "$tmp/advice.out" --algo auto -b 16M -e 16M -w 1 --iters 6
if ! "$TUNE" health "$tmp"/advice/* >"$tmp/health" 2>"$tmp/health.err"; then
  # Single-rail connections carry no per-rail rate estimate, and braid-perf asks the tuner only
  # while planning, so the advice may hold no telemetry: then the health file says what the
  # shaping did (as an operator would write it), and the report says so.
  sed 's/^/# advice unusable: /' "$tmp/health.err" >&2
  { echo "braid-health 1"; echo "# written by bench/tuner.sh from the shaping: $(cat "$tmp/health.err")"
    echo "h0 0.25"; echo "h1 1"; echo "h2 1"; echo "h3 1"; } >"$tmp/health"
fi
export BRAID_TUNER_HEALTH=$tmp/health
export "$("$TUNE" pin 2>/dev/null)"
cp "$tmp/health" "$raw/health"
sweep slow
cp "$tmp"/healthy-* "$tmp"/slow-* "$raw/"

# report: time_us (column 5 of braid-perf's rows) per size, per algorithm, per repeat
collect() { # tag algo -> "size t1 t2 ..." lines
  local tag=$1 algo=$2
  for rep in $(seq 1 "$REPEATS"); do
    cat "$tmp/$tag-$algo-$rep-s" "$tmp/$tag-$algo-$rep-l" | awk -v rep="$rep" '/^ +[0-9]/ {print $1, rep, $5}'
  done | sort -n -k1,1 -k2,2 | awk '{a[$1] = a[$1] " " $3} END {for (s in a) print s a[s]}' | sort -n
}
report() {
  local tag=$1
  for algo in ring tree collnet nccl auto; do collect "$tag" "$algo" | sed "s/^/$algo /"; done >"$tmp/$tag.times"
  cp "$tmp/$tag.times" "$raw/"
  local sizes
  sizes=$(awk '{print $2}' "$tmp/$tag.times" | sort -nu | tr '\n' ' ')
  awk -v tag="$tag" -v sizes="$sizes" '
    function sort(v, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t } }
    function med(s,   n, v) { n = split(s, v, " "); sort(v, n); return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
    function mn(s,   n, v) { n = split(s, v, " "); sort(v, n); return v[1] }
    function mx(s,   n, v) { n = split(s, v, " "); sort(v, n); return v[n] }
    { algo = $1; size = $2; $1 = ""; $2 = ""; t[algo, size] = $0 }
    END {
      printf "%-7s %10s %10s %10s %10s %10s %10s  %-8s %6s %6s %s\n", tag, "bytes", "ring", "tree", "collnet", "nccl", "auto", "best", "b/auto", "nccl/a", "separated"
      worst = 9; worst_n = 9; nsep = 0
      n = split(sizes, ss, " ")
      for (i = 1; i <= n; i++) {
        s = ss[i]; best = ""; bm = 1e18; sb = ""; second = 1e18
        for (a = 1; a <= 3; a++) {
          al = a == 1 ? "ring" : a == 2 ? "tree" : "collnet"; m[al] = med(t[al, s])
          if (m[al] < bm) { second = bm; sb = best; bm = m[al]; best = al } else if (m[al] < second) { second = m[al]; sb = al }
        }
        sep = mx(t[best, s]) < mn(t[sb, s]) ? "yes" : "no"
        au = med(t["auto", s]); nc = med(t["nccl", s])
        r = au > 0 ? bm / au : 0; rn = au > 0 ? nc / au : 0
        if (sep == "yes") { nsep++; if (r < worst) worst = r }
        if (rn < worst_n) worst_n = rn
        printf "%-7s %10d %10.0f %10.0f %10.0f %10.0f %10.0f  %-8s %6.2f %6.2f %s\n", "", s, m["ring"], m["tree"], m["collnet"], nc, au, best, r, rn, sep
      }
      printf "%s: auto / best fixed, worst of the %d sizes where the repeats separate the algorithms: %s (target >= 0.95); NCCL model choice / auto, worst: %.2f (target >= 1, noise aside)\n", tag, nsep, nsep ? sprintf("%.2f", worst) : "n/a", worst_n
    }' "$tmp/$tag.times"
}
{
  echo "# braid tuner on the netbed, $(date -u +%Y-%m-%dT%H:%MZ): 4 GPU hosts x $RAILS NIC(s) at $RATE, $((4 * RAILS)) braid-ps servers, allreduce fp32, $CHANNELS channels"
  echo "# median time in us of $REPEATS interleaved repeats; b/auto = best fixed / auto (>= 0.95), nccl/a = NCCL's model choice / auto (>= 1)"
  echo "# calibration:"; sed 's/^/#   /' "$cal" | head -n 8
  echo "# health file for the slow run:"; sed 's/^/#   /' "$tmp/health"
  report healthy
  echo "# auto's choices, healthy:"; grep -h '^ *[0-9]' "$tmp/healthy-auto-1-s" "$tmp/healthy-auto-1-l" | sed 's/^/#   /'
  report slow
  echo "# auto's choices, host 0 slow:"; grep -h '^ *[0-9]' "$tmp/slow-auto-1-s" "$tmp/slow-auto-1-l" | sed 's/^/#   /'
} | tee "$out"
