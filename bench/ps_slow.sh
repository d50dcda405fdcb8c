#!/usr/bin/env bash
# braid-ps with one slow or lost server (issue 24), on the CollNet netbed (root; see
# bench/collnet_netbed.sh): 8 hosts with one NIC each at RATE (default 200mbit), 4 braid-perf
# heads (hosts 0-3, 8 channels), 4 braid-ps servers (hosts 4-7).  Allreduce of 64 MiB fp32, per
# round side by side:
#   healthy                           best: itself
#   server 0's NIC at RATE/4          best: healthy x 3.25/4
#   server 0's NIC at RATE/10         best: healthy x 3.1/4
#   server 0 killed during warm-up    best: healthy x 3/4
#   server 0 at RATE/4, restored      best: healthy (restored RECOVER_AT s into a warm-up of 14
#                                     iterations: rank 0 must probe it back to a full share)
# Why these: every head sends its whole buffer and receives the whole result, whatever the
# layout, so the heads' NICs carry the same bytes in every case; healthy, 4 heads and 4 servers
# of the same rate are balanced.  With server 0 at a fraction f, the servers together take
# 3 + f NICs' worth where the heads give 4: at best busbw is (3 + f)/4 of healthy, reached when
# each server's share is proportional to its rate.  Killed: 3 servers left, (3 + 0)/4.  The
# ratios use each round's own healthy figure.  Each case warms up 3 iterations (the weights
# settle: rates over windows of 8 operations, applied 32 operations later; one iteration is 64
# operations per head) and times 6.
# Usage: [RATE=200mbit] [CHANNELS=8] [CASES="slow4 slow10 killed recovered"] bench/ps_slow.sh [ROUNDS]
# (default 5 rounds).  Prints each case's
# ratio to its best, min and median over the rounds (goal: >= 0.95 every round), and writes
# bench/results/ps_slow-<date>.txt.  Ratios come from the times (braid-perf prints busbw to
# 3 decimals only: 0.021 GB/s is +-2.5%); busbw = 2 x 3/4 x 64 MiB / time.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/stats.sh
rounds=${1:-5}
RATE=${RATE:-200mbit}
CHANNELS=${CHANNELS:-8}
. bench/collnet_netbed.sh # the netbed, servers, run
out=bench/results/ps_slow-$(date +%Y%m%d-%H%M%S).txt
W=(-w 3 --iters 6)

servers 7000 4 5 6 7
DEDICATED=$BRAID_PS_SERVERS
# Rank 0 logs each change of weights (INFO, NET: "CollNet weights from op N on: ADDR=W (R MB/s
# [, probing]) ..."); weights CASE appends the last run's lines to $wlog, kept beside the table.
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET
wlog=${out%.txt}-weights.txt
weights() { { echo "# round $r, $1"; grep -o "CollNet weights.*" "$tmp/r0" || true; } >>"$wlog"; }
frac() { awk -v r="${RATE%mbit}" -v d="$1" 'BEGIN {printf "%dmbit", r / d}'; }
# slowed DIV: server 0's NIC at RATE/DIV for one run; prints its time (us)
slowed() {
  $NB --prefix $P shape 4 0 "$(frac "$1")" >/dev/null
  local t
  read -r t _ < <(BRAID_PS_SERVERS=$DEDICATED run --algo collnet "${W[@]}")
  $NB --prefix $P restore 4 0 >/dev/null
  weights "1/$1"
  echo "$t"
}
# killed ROUND: a server of its own on host 4 (port 7100 + ROUND), SIGKILLed 4 s into the
# warm-up; prints the time (us), fails when no head logged the loss
killed() {
  local port=$((7100 + $1)) list
  $NB --prefix $P exec 4 "$PS" --listen "$(addr 4):$port" --threads 2 >"$tmp/ps-4-$port.log" 2>&1 &
  local victim=$!
  spids+=("$victim")
  sleep 0.5
  list="$(addr 4):$port,${DEDICATED#*,}"
  ( sleep 4; kill -9 "$victim" 2>/dev/null ) &
  local killer=$! t
  read -r t _ < <(BRAID_PS_SERVERS=$list run --algo collnet "${W[@]}")
  wait "$killer"
  grep -q "lost" "$tmp/r0" "$tmp/r1" "$tmp/r2" "$tmp/r3" || { echo "ps_slow: no head logged the lost server" >&2; return 1; }
  weights killed
  echo "$t"
}
# recovered: server 0's NIC at RATE/4 from the start, restored RECOVER_AT (default 15) s into a
# long warm-up; prints the time (us) of the iterations after it
RECOVER_AT=${RECOVER_AT:-15}
recovered() {
  $NB --prefix $P shape 4 0 "$(frac 4)" >/dev/null
  ( sleep "$RECOVER_AT"; $NB --prefix $P restore 4 0 >/dev/null ) &
  local fixer=$! t
  read -r t _ < <(BRAID_PS_SERVERS=$DEDICATED run --algo collnet -w 14 --iters 4)
  wait "$fixer"
  weights recovered
  echo "$t"
}
# rat TIME HEALTHY_TIME SHARE: the case's busbw over healthy's x SHARE; bw TIME: busbw in GB/s
rat() { awk -v t="$1" -v h="$2" -v f="$3" 'BEGIN {printf "%.3f", (t > 0 ? h / (t * f) : 0)}'; }
bw() { awk -v t="$1" 'BEGIN {printf "%.4f", (t > 0 ? 1.5 * 64 * 1048576 / (t * 1e3) : 0)}'; }

# CASES (default all): which cases besides healthy run, e.g. CASES=recovered
CASES=${CASES:-slow4 slow10 killed recovered}
want() { [[ " $CASES " == *" $1 "* ]]; }

for r in $(seq 1 "$rounds"); do
  echo "# round $r/$rounds" >&2
  read -r h _ < <(BRAID_PS_SERVERS=$DEDICATED run --algo collnet "${W[@]}"); add healthy "$(bw "$h")"
  s4=- s10=- k=- v=-
  if want slow4; then s4=$(slowed 4); add slow4 "$(bw "$s4")"; add r_slow4 "$(rat "$s4" "$h" 0.8125)"; fi
  if want slow10; then s10=$(slowed 10); add slow10 "$(bw "$s10")"; add r_slow10 "$(rat "$s10" "$h" 0.775)"; fi
  if want killed; then k=$(killed "$r"); add killed "$(bw "$k")"; add r_killed "$(rat "$k" "$h" 0.75)"; fi
  if want recovered; then v=$(recovered); add recovered "$(bw "$v")"; add r_recovered "$(rat "$v" "$h" 1)"; fi
  echo "# time (us): healthy $h, 1/4 $s4, 1/10 $s10, killed $k, recovered $v" >&2
done

all_ge() { echo "${vals[$1]:-}" | tr ' ' '\n' | grep -v '^$' | awk -v t="$2" '$1 < t {bad = 1} END {print bad ? "no" : "yes"}'; }
{
  echo "# braid-ps, one slow or lost server, on the netbed, $(date -u +%Y-%m-%dT%H:%MZ), 8 hosts x 1 NIC at $RATE (4 heads, 4 servers), allreduce 64 MiB fp32"
  echo "# $rounds rounds; busbw in GB/s (1e9 B/s) = 2(n-1)/n x bytes / time, n = 4; ratio = busbw / (healthy busbw of the same round x best share)"
  printf '%-34s %9s %9s %9s   %s\n' case "busbw" "ratio min" "median" "raw ratios (>= 0.95 every round?)"
  printf '%-34s %9s %9s %9s   [%s]\n' "healthy" "$(m healthy)" "" "" "${vals[healthy]}"
  want slow4 && printf '%-34s %9s %9s %9s   [%s] %s\n' "server 0 at 1/4 (best 3.25/4)" "$(m slow4)" "$(mn r_slow4)" "$(m r_slow4)" "${vals[r_slow4]:-}" "$(all_ge r_slow4 0.95)"
  want slow10 && printf '%-34s %9s %9s %9s   [%s] %s\n' "server 0 at 1/10 (best 3.1/4)" "$(m slow10)" "$(mn r_slow10)" "$(m r_slow10)" "${vals[r_slow10]:-}" "$(all_ge r_slow10 0.95)"
  want killed && printf '%-34s %9s %9s %9s   [%s] %s\n' "server 0 killed (best 3/4)" "$(m killed)" "$(mn r_killed)" "$(m r_killed)" "${vals[r_killed]:-}" "$(all_ge r_killed 0.95)"
  want recovered && printf '%-34s %9s %9s %9s   [%s] %s\n' "server 0 at 1/4, restored (best 1)" "$(m recovered)" "$(mn r_recovered)" "$(m r_recovered)" "${vals[r_recovered]:-}" "$(all_ge r_recovered 0.95)"
  :
} | tee "$out"
echo "# rank 0's weights, every case and round: $wlog"
