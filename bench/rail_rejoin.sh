#!/usr/bin/env bash
# What a NIC reset costs over TCP sockets and libfabric (root; the netbed: 2 hosts x 4 rails
# shaped to RATE, default 200mbit): braid-perf sendrecv --oneway 8 MiB from host 0 to host 1,
# each run ITERS iterations (about 30 s of traffic).  Interleaved rounds, per transport, of:
#   healthy: nothing happens;
#   reset:   5 s after the connections are made, rail 2 of host 0 goes down (link down) with its
#            TCP connections destroyed (ss -K), as a NIC or driver reset leaves it, and its link
#            comes back DOWN s later (default 3).
# Every run is verified (--check-all).  Host 0's four interfaces' transmitted bytes are sampled
# every 0.25 s, from which:
#   time to data: from the link coming back until eth2 carries at least half of its rate before
#     the fault again, over 0.5 s (the scheduler probes a rejoined rail before it gives it data);
#   after/healthy: the four rails' rate over the window 8 s to 2 s before the end of the reset
#     run's traffic, against the healthy run's over its own such window (goal >= 0.95).
# Usage: [ROUNDS=3] [RATE=200mbit] [DOWN=3] [ITERS=350] [TRANSPORTS="socket ofi"] bench/rail_rejoin.sh
# Writes bench/results/rail-rejoin-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-200mbit}
DOWN=${DOWN:-3}
ITERS=${ITERS:-350}
TRANSPORTS=${TRANSPORTS:-socket ofi}
NB=test/netbed/netbed.sh
P=br$$
[ "$(id -u)" = 0 ] || { echo "rail_rejoin: needs root (network namespaces)"; exit 1; }
make -s build/braid-perf build/libnccl-net-braid.so
mkdir -p bench/results
out=bench/results/rail-rejoin-$(date +%Y%m%d-%H%M%S).txt
tmp=$(mktemp -d)
trap '$NB --prefix $P down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
$NB --prefix $P up --hosts 2 --rails 4 --rate "$RATE" >/dev/null
PERF=$(realpath build/braid-perf)
export NCCL_NET_PLUGIN=$(realpath build/libnccl-net-braid.so) BRAID_SOCKET_IFNAME=eth FI_PROVIDER=tcp
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
now() { date +%s.%N; }

# run NAME TRANSPORT RESET(0|1): leaves $tmp/NAME.samples ("time eth0 eth1 eth2 eth3" tx bytes)
# and $tmp/NAME.up (when the link came back)
run() {
  local name=$1 transport=$2 reset=$3 port=$((30000 + RANDOM % 20000))
  local a=(sendrecv --oneway -b 8M -e 8M -w 1 --iters "$ITERS" --check-all --timeout 60 --nranks 2
           --rendezvous 10.77.0.1:$port)
  $NB --prefix $P exec 0 bash -c 'while :; do echo "$(date +%s.%N) $(cat /sys/class/net/eth{0,1,2,3}/statistics/tx_bytes | tr "\n" " ")"; sleep 0.25; done' \
    >"$tmp/$name.samples" 2>/dev/null & local sp=$!
  BRAID_TRANSPORT=$transport $NB --prefix $P exec 1 "$PERF" "${a[@]}" --rank 1 >"$tmp/$name.r1" 2>&1 & local p1=$!
  BRAID_TRANSPORT=$transport $NB --prefix $P exec 0 "$PERF" "${a[@]}" --rank 0 >"$tmp/$name.r0" 2>&1 & local p0=$!
  for _ in $(seq 600); do grep -q "(elements)" "$tmp/$name.r0" && break; kill -0 $p0 2>/dev/null || break; sleep 0.1; done
  if [ "$reset" = 1 ]; then
    sleep 5
    $NB --prefix $P cut 0 2 --admin >/dev/null
    $NB --prefix $P exec 0 ss -K -t state connected src 10.77.2.1 >/dev/null 2>&1
    sleep "$DOWN"; $NB --prefix $P restore 0 2 >/dev/null; now >"$tmp/$name.up"
  fi
  local rc=0
  wait $p0 || rc=$?
  wait $p1 || true
  kill $sp 2>/dev/null; wait $sp 2>/dev/null || true
  if [ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/$name.r0"; then echo "$name: verified"
  else echo "$name: FAILED (exit $rc)"; tail -n 5 "$tmp/$name.r0"; return 1; fi
}

# rate FILE: bytes/s of all four rails over [end - 8 s, end - 2 s], end: the last sample of the
# traffic (the last with over 1 MB/s)
rate() {
  awk '{ t[NR] = $1; b[NR] = $2 + $3 + $4 + $5 }
       END { for (i = 2; i <= NR; i++) if ((b[i] - b[i-1]) / (t[i] - t[i-1]) > 1e6) e = i
             for (i = 1; i <= e; i++) { if (!a && t[i] >= t[e] - 8) a = i; if (t[i] <= t[e] - 2) z = i }
             if (!a || z <= a) { print 0; exit } printf "%.0f\n", (b[z] - b[a]) / (t[z] - t[a]) }' "$1"
}

# to_data FILE UP: seconds from UP until eth2 carries half its pre-fault rate over 0.5 s
to_data() {
  awk -v up="$2" -v down="$DOWN" '{ t[NR] = $1; b[NR] = $4 }
       END { for (i = 2; i <= NR; i++) {
               if (t[i] <= up - down - 0.2 && t[i] >= up - down - 2.2) { pre += b[i] - b[i-1]; pt += t[i] - t[i-1] } }
             if (pt <= 0) { print "n/a"; exit } half = pre / pt / 2
             for (i = 3; i <= NR; i++) if (t[i-2] >= up && (b[i] - b[i-2]) / (t[i] - t[i-2]) >= half) {
               printf "%.2f\n", t[i-2] - up; exit }
             print "never" }' "$1"
}

{
  echo "# bench/rail_rejoin.sh $(date -u +%FT%TZ) $(uname -n): netbed 2 hosts x 4 rails at $RATE, sendrecv --oneway 8M x $ITERS;"
  echo "# rail 2 of the sender down (link down, ss -K) for $DOWN s, 5 s in"
  for r in $(seq "$ROUNDS"); do
    for t in $TRANSPORTS; do
      run "$t-healthy$r" "$t" 0
      run "$t-reset$r" "$t" 1
      h=$(rate "$tmp/$t-healthy$r.samples"); a=$(rate "$tmp/$t-reset$r.samples")
      d=$(to_data "$tmp/$t-reset$r.samples" "$(cat "$tmp/$t-reset$r.up")")
      echo "round $r $t: link back to eth2 at half its rate: $d s; healthy $(awk -v h="$h" 'BEGIN { printf "%.1f", h * 8 / 1e6 }') Mbit/s," \
           "after the rejoin $(awk -v a="$a" 'BEGIN { printf "%.1f", a * 8 / 1e6 }') Mbit/s: after/healthy" \
           "$(awk -v a="$a" -v h="$h" 'BEGIN { printf "%.2f", (h > 0 ? a / h : 0) }')"
    done
  done
} | tee "$out"
echo "wrote $out"
