#!/usr/bin/env bash
# What a verbs port flap costs, in the soft-RoCE guest (tools/vm; root, qemu): two rxe rails
# shaped with netem at RATE each (default 25mbit, well below what rxe moves under emulation),
# braid-perf sendrecv --oneway 8 MiB in 512 KiB network pieces with BRAID_TRANSPORT=verbs, each
# run long enough (ITERS) to carry data for about 30 s.  Interleaved rounds of:
#   healthy: nothing happens;
#   flap:    5 s after the connections are made, rail 1's interface on the receiver's side goes
#            down for DOWN seconds (default 3) and comes back (braid-fabric routes it again).
# Every run is verified (--check-all). The sender's interfaces' transmitted bytes (va0, va1) are
# sampled every 0.25 s, from which:
#   time to data: from the interface coming back until rail 1 carries at least half its rate
#     again (over 0.5 s; the scheduler probes a rejoined rail before it gives it data);
#   after/healthy: both rails' payload rate over the window 8 s to 2 s before the end of the
#     flap run's traffic, against the healthy run's rate over its own last such window (goal >=
#     0.95): the bandwidth once the rail is back, against a run that never failed.
# Usage: [ROUNDS=2] [RATE=25mbit] [DOWN=3] [ITERS=28] bench/verbs_rejoin.sh
# Writes bench/results/verbs-rejoin-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
RATE=${RATE:-25mbit}
DOWN=${DOWN:-3}
ITERS=${ITERS:-28}
. test/vm/lib.sh
vm_image
make -s build/braid-perf build/libnccl-net-braid.so
vm_share build/braid-perf build/libnccl-net-braid.so
mkdir -p bench/results
out=bench/results/verbs-rejoin-$(date +%Y%m%d-%H%M%S).txt

read -r -d '' guest <<EOF || true
ROUNDS=$ROUNDS RATE=$RATE DOWN=$DOWN ITERS=$ITERS
EOF
read -r -d '' guest_body <<'EOF' || true
set -uo pipefail
export BRAID_TRANSPORT=verbs NCCL_P2P_NET_CHUNKSIZE=524288 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
now() { date +%s.%N; }
tx() { cat /sys/class/net/$1/statistics/tx_bytes; }
# sample FILE: "time va0_tx va1_tx" every 0.25 s until killed
sample() { while :; do echo "$(now) $(tx va0) $(tx va1)"; sleep 0.25; done >"$1"; }
# run NAME FLAP(0|1): one verified run; prints "NAME ok|fail" and leaves /tmp/NAME.samples,
# /tmp/NAME.up (when the interface came back)
run() {
  local name=$1 flap=$2 port=$((30000 + RANDOM % 20000))
  local a=(sendrecv --oneway -b 8M -e 8M -w 1 -i "$ITERS" --check-all --nranks 2 --rendezvous 127.0.0.1:$port
           --plugin ./libnccl-net-braid.so --timeout 60)
  sample /tmp/$name.samples & local sp=$!
  NCCL_SOCKET_IFNAME==vb0,vb1 timeout 300 ./braid-perf "${a[@]}" --rank 1 >/tmp/$name.r1 2>&1 &
  local p1=$!
  NCCL_SOCKET_IFNAME==va0,va1 timeout 300 ./braid-perf "${a[@]}" --rank 0 >/tmp/$name.r0 2>&1 &
  local p0=$!
  for _ in $(seq 600); do grep -q "(elements)" /tmp/$name.r0 && break; kill -0 $p0 2>/dev/null || break; sleep 0.1; done
  if [ "$flap" = 1 ]; then
    sleep 5; ip link set vb1 down; sleep "$DOWN"; ip link set vb1 up; braid-fabric route 1; now >/tmp/$name.up
  fi
  local rc=0
  wait $p0 || rc=$?
  wait $p1
  kill $sp; wait $sp 2>/dev/null
  if [ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" /tmp/$name.r0; then echo "$name ok"; else echo "$name fail"; tail -5 /tmp/$name.r0; fi
}
for r in 0 1; do braid-fabric netem $r a rate "$RATE"; done
for i in $(seq 1 "$ROUNDS"); do
  run healthy$i 0; run flap$i 1
  # rates: the last 6 s window ending 2 s before the traffic stopped (Mbit/s of both rails)
  for n in healthy$i flap$i; do
    awk -v name=$n '{t[NR] = $1; b[NR] = $2 + $3} END {
      last = NR; while (last > 1 && b[last] == b[last - 1]) last--
      e = last; while (e > 1 && t[last] - t[e] < 2) e--
      s = e; while (s > 1 && t[e] - t[s] < 6) s--
      printf "rate %s %.1f\n", name, (b[e] - b[s]) * 8 / (t[e] - t[s]) / 1e6 }' /tmp/$n.samples
  done
  # time to data: rail 1 at half its rate again (0.5 s window), after the interface came back
  up=$(cat /tmp/flap$i.up)
  awk -v up="$up" -v rate="$RATE" 'BEGIN {r = rate + 0; if (rate ~ /kbit/) r /= 1000}
    {t[NR] = $1; b[NR] = $3} END {
      for (i = 1; i <= NR; i++) { if (t[i] < up) continue
        for (j = i; j > 1 && t[i] - t[j] < 0.5; j--);
        if (t[i] > t[j] && (b[i] - b[j]) * 8 / (t[i] - t[j]) / 1e6 >= r / 2) { printf "todata %.2f\n", t[i] - up; exit } }
      print "todata never" }' /tmp/flap$i.samples
  grep -h "rejoined after" /tmp/flap$i.r0 | sed 's/.*NET\/braid : /rejoin line: /' | head -n 2
done
EOF
raw=$(mktemp)
VM_TIMEOUT=${VM_TIMEOUT:-1200} vm_run "verbs rejoin bench" "$guest
$guest_body" | tee "$raw" | grep -E "^(healthy|flap|rate|todata|rejoin line)" || true
median() { sort -n | awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
vals() { grep -E "^$1" "$raw" | awk '{printf "%s ", $NF}'; }
mh=$(grep -E "^rate healthy" "$raw" | awk '{print $3}' | median)
mf=$(grep -E "^rate flap" "$raw" | awk '{print $3}' | median)
mt=$(grep -E "^todata [0-9]" "$raw" | awk '{print $2}' | median)
ratios=$(paste <(grep -E "^rate healthy" "$raw" | awk '{print $3}') <(grep -E "^rate flap" "$raw" | awk '{print $3}') |
         awk '{ if ($1 > 0) printf "%.2f ", $2 / $1 }')
fails=$(grep -cE "^(healthy|flap)[0-9]+ fail" "$raw" || true)
{
  echo "# braid verbs rail rejoin in the soft-RoCE guest (TCG), $(date -u +%Y-%m-%dT%H:%MZ): 2 rxe rails at $RATE each (netem), rail 1's interface down $DOWN s once per flap run"
  echo "# medians of $ROUNDS interleaved rounds; runs failed: $fails (each verified, --check-all)"
  printf '%-62s %8s Mbit/s   [%s]\n' "healthy run, both rails, last 6 s window" "$mh" "$(vals 'rate healthy')"
  printf '%-62s %8s Mbit/s   [%s]\n' "flap run, both rails, last 6 s window (rail 1 back)" "$mf" "$(vals 'rate flap')"
  printf '%-62s %8s          [%s] (goal >= 0.95)\n' "after the rejoin / healthy, per round" \
    "$(awk -v a="$mf" -v b="$mh" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')" "$ratios"
  printf '%-62s %8s s        [%s]\n' "interface back -> rail 1 at half its rate again" "$mt" "$(vals 'todata')"
} | tee "$out"
rm -f "$raw"
echo "# written to $out"
