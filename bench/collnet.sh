#!/usr/bin/env bash
# CollNet (braid-ps) figures on the netbed (root): 8 hosts with one NIC each, every NIC shaped to
# RATE (default 400mbit): hosts 0-3 are GPU nodes (one braid-perf head each), hosts 4-7 run
# braid-ps.  Side by side in the same run, allreduce of 64 MiB, busbw (2(n-1)/n x size / time):
#   - ring over braid's net plugin (NCCL's ring, 4 ranks)                        theory: RATE
#   - collnet with 4 dedicated servers                                           theory: 1.5 x ring
#   - collnet with the 4 servers co-located on the GPU nodes                     theory: ~1.0 x ring
#   - collnet with server 0's NIC at RATE/4, adaptive weights and equal weights  theory: 3.25/4 and 1/4
#   - hold-back off (BRAID_PS_HOLD=0) for the healthy path's cost of hold-back, and 8-byte latency
#   - a server killed during a long, fully verified run
# Usage: [RATE=400mbit] [CHANNELS=8] [ONLY=basic] bench/collnet.sh [ROUNDS]   (default 2).  Writes bench/results/collnet-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/stats.sh
rounds=${1:-2}
RATE=${RATE:-400mbit}
CHANNELS=${CHANNELS:-8}   # NCCL channels (CollNet: one iallreduce carries up to 8 channel chunks)
. bench/collnet_netbed.sh # the netbed, servers, run
out=bench/results/collnet-$(date +%Y%m%d-%H%M%S).txt

servers 7000 4 5 6 7
DEDICATED=$BRAID_PS_SERVERS
victim=${spids[1]} # host 5's server, killed in the last step
servers 7001 0 1 2 3
COLOC=$BRAID_PS_SERVERS

for r in $(seq 1 "$rounds"); do
  echo "# round $r/$rounds" >&2
  read -r _ b < <(run --algo ring -w 1 --iters 3); add ring "$b"
  read -r _ b < <(BRAID_PS_SERVERS=$DEDICATED run --algo collnet -w 1 --iters 3); add collnet "$b"
  [ "${ONLY:-}" = basic ] && continue
  read -r _ b < <(BRAID_PS_SERVERS=$DEDICATED BRAID_PS_HOLD=0 run --algo collnet -w 1 --iters 3); add collnet_nohold "$b"
  read -r _ b < <(BRAID_PS_SERVERS=$COLOC run --algo collnet -w 1 --iters 3); add coloc "$b"
  read -r t _ < <(run --algo ring -b 8 -e 8 -w 20 --iters 200); add lat_ring "$t"
  read -r t _ < <(BRAID_PS_SERVERS=$DEDICATED run --algo collnet -b 8 -e 8 -w 20 --iters 200); add lat_hold "$t"
  read -r t _ < <(BRAID_PS_SERVERS=$DEDICATED BRAID_PS_HOLD=0 run --algo collnet -b 8 -e 8 -w 20 --iters 200); add lat_nohold "$t"
  slow=$(awk -v r="${RATE%mbit}" 'BEGIN {printf "%dmbit", r / 4}')
  $NB --prefix $P shape 4 0 "$slow" >/dev/null
  # the weights settle over the first iterations (rates over windows of 8 operations, applied
  # 32 operations later; one iteration is 64 operations per head): warm up 4, then time 8
  read -r _ b < <(BRAID_PS_SERVERS=$DEDICATED run --algo collnet -w 4 --iters 8); add slow_adaptive "$b"
  read -r _ b < <(BRAID_PS_SERVERS=$DEDICATED BRAID_PS_WEIGHTING=equal run --algo collnet -w 1 --iters 2); add slow_equal "$b"
  $NB --prefix $P restore 4 0 >/dev/null
done

# A server killed during a long run: every iteration checked.
kill_ok=skipped
if [ "${ONLY:-}" != basic ]; then
echo "# server kill" >&2
export BRAID_PS_SERVERS=$DEDICATED
( sleep 6; kill -9 "$victim" 2>/dev/null || true ) &
killer=$!
kill_ok=no
if run --algo collnet -b 16M -e 16M -w 1 --iters 40 --check-all >/dev/null && grep -q "lost" "$tmp/r0" "$tmp/r1" "$tmp/r2" "$tmp/r3"; then kill_ok=yes; fi
wait "$killer"
fi

{
  echo "# braid CollNet on the netbed, $(date -u +%Y-%m-%dT%H:%MZ), 8 hosts x 1 NIC at $RATE, allreduce 64 MiB fp32"
  echo "# medians of $rounds rounds; busbw in GB/s (1e9 B/s) = 2(n-1)/n x bytes / time, n = 4; raw values in brackets"
  printf '%-52s %8s   %s\n' figure median "ratio (target)"
  printf '%-52s %8s   [%s]\n' "ring allreduce, 4 nodes" "$(m ring)" "${vals[ring]:-}"
  printf '%-52s %8s   %sx ring (>= 1.3; theory 1.5)  [%s]\n' "collnet, 4 dedicated servers" "$(m collnet)" "$(ratio "$(m collnet)" "$(m ring)")" "${vals[collnet]:-}"
  printf '%-52s %8s   %sx ring (theory ~1.0)  [%s]\n' "collnet, servers co-located on the 4 nodes" "$(m coloc)" "$(ratio "$(m coloc)" "$(m ring)")" "${vals[coloc]:-}"
  printf '%-52s %8s   %sx hold-back on  [%s]\n' "collnet, BRAID_PS_HOLD=0" "$(m collnet_nohold)" "$(ratio "$(m collnet_nohold)" "$(m collnet)")" "${vals[collnet_nohold]:-}"
  printf '%-52s %8s   [%s]\n' "ring 8 B allreduce latency (us)" "$(m lat_ring)" "${vals[lat_ring]:-}"
  printf '%-52s %8s   [%s]\n' "collnet 8 B latency, hold-back on (us)" "$(m lat_hold)" "${vals[lat_hold]:-}"
  printf '%-52s %8s   [%s]\n' "collnet 8 B latency, BRAID_PS_HOLD=0 (us)" "$(m lat_nohold)" "${vals[lat_nohold]:-}"
  best=$(awk -v h="$(m collnet)" 'BEGIN {printf "%.4f", h * 3.25 / 4}')
  printf '%-52s %8s   %sx best weighting 3.25/4 of healthy (>= 0.95)  [%s]\n' "collnet, server 0 at a quarter rate, adaptive" "$(m slow_adaptive)" "$(ratio "$(m slow_adaptive)" "$best")" "${vals[slow_adaptive]:-}"
  printf '%-52s %8s   %sx best weighting  [%s]\n' "collnet, server 0 at a quarter rate, equal weights" "$(m slow_equal)" "$(ratio "$(m slow_equal)" "$best")" "${vals[slow_equal]:-}"
  echo "server killed during a 40-iteration verified run: completed correctly: $kill_ok"
} | grep -v ' \[\]$' | tee "$out" # (figures ONLY=basic did not measure are left out)
