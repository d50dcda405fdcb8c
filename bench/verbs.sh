#!/usr/bin/env bash
# The verbs transport's multi-rail figures in the soft-RoCE guest (tools/vm; root, qemu): rank 0
# on rxe_a0-3, rank 1 on rxe_b0-3, braid-perf sendrecv --oneway 8 MiB with BRAID_TRANSPORT=verbs,
# rails shaped with netem at RATE (default 25mbit: 100 Mbit/s in all, well below what rxe moves
# under software emulation, about 250), against the shaped rails' line rate, interleaved rounds:
#   healthy: braid / 4 x RATE, and BRAID_STRIPING=equal beside it;
#   rail 3 at SLOW (default a tenth of RATE): braid / (3 x RATE + SLOW), equal beside it;
# each in NCCL's default 128 KiB network pieces and in 512 KiB ones (NCCL_P2P_NET_CHUNKSIZE):
# NCCL keeps 8 pieces in flight per channel, and on these slow emulated rails 8 x 128 KiB is
# less than what is in flight between posting a receive and its data landing, so NCCL's window,
# not the transport, bounds the default row (on real 100-400 Gb/s rails it is far more than the
# bandwidth-delay product);
#   a rail cut mid-run (loss 100% both ways on rail 2, 3 s in): every iteration verified.
# The capacity is measured in the same boot: ib_write_bw alone on one rail shaped to RATE, and
# alone on one shaped to SLOW (4 concurrent ib_write_bw are not used: under TCG some of them
# report 0 MB/s).  The line rate counts every byte netem sends: RoCE v2 headers (Ethernet, IP,
# UDP, BTH, ICRC: 58 bytes per 1024-byte packet at rxe's MTU) leave at most 0.946 of it.
# Usage: [ROUNDS=2] [RATE=25mbit] [SLOW=2500kbit] bench/verbs.sh
# Writes bench/results/verbs-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
RATE=${RATE:-25mbit}
SLOW=${SLOW:-2500kbit}
. test/vm/lib.sh
vm_image
make -s build/braid-perf build/libnccl-net-braid.so
vm_share build/braid-perf build/libnccl-net-braid.so
mkdir -p bench/results
out=bench/results/verbs-$(date +%Y%m%d-%H%M%S).txt

read -r -d '' guest <<EOF || true
ROUNDS=$ROUNDS RATE=$RATE SLOW=$SLOW
EOF
read -r -d '' guest_body <<'EOF' || true
set -uo pipefail
export BRAID_TRANSPORT=verbs
# one RAIL RATE BYTES ITERS: ib_write_bw alone on RAIL shaped to RATE (Mbit/s of payload), with
# a 1 s ACK timeout (-u 18): perftest's default (67 ms) retransmits writes that take longer than
# that on a slow rail and measures a fifth of what the rail carries.
one() {
  local r=$1
  braid-fabric netem $r a rate "$2"
  ib_write_bw -d rxe_b$r -x 1 -u 18 -s $3 -n $4 -F --report_gbits >/tmp/s 2>&1 &
  sleep 1
  ib_write_bw -d rxe_a$r -x 1 -u 18 -s $3 -n $4 -F --report_gbits 10.88.$r.2 >/tmp/c 2>&1
  wait
  awk -v s=$3 '$1 == s {printf "%.2f", $4 * 1000}' /tmp/c
}
# braid [FAULT]: Mbit/s of sendrecv --oneway 8 MiB (algbw of the row), verified or "fail"
braid() {
  local fault=${1:-} iters=${2:-6} port=$((30000 + RANDOM % 20000))
  local a=(sendrecv --oneway -b 8M -e 8M -w 1 -i $iters --nranks 2 --rendezvous 127.0.0.1:$port
           --plugin ./libnccl-net-braid.so --timeout 60)
  NCCL_SOCKET_IFNAME=vb ./braid-perf "${a[@]}" --rank 1 >/tmp/b1 2>&1 &
  NCCL_SOCKET_IFNAME=va ./braid-perf "${a[@]}" --rank 0 >/tmp/b0 2>&1 &
  local p0=$!
  if [ -n "$fault" ]; then sleep 3; sh -c "$fault"; fi
  if wait $p0 && grep -q "Out of bounds values : 0 OK" /tmp/b0; then
    awk '/^ +[0-9]/ {t = $5} END {printf "%.1f", 8388608 * 8 / t}' /tmp/b0
  else echo fail; fi
  wait
}
shape() { for r in 0 1 2 3; do braid-fabric netem $r a rate "$1"; done; [ -z "${2:-}" ] || braid-fabric netem 3 a rate "$2"; }
for i in $(seq 1 "$ROUNDS"); do
  shape "$RATE"
  echo "rail rate $(one 0 "$RATE" 1048576 10)"
  echo "rail slow $(one 3 "$SLOW" 65536 24)"
  shape "$RATE"
  echo "healthy braid $(braid)"
  echo "healthy braid512 $(NCCL_P2P_NET_CHUNKSIZE=524288 braid)"
  echo "healthy equal $(NCCL_P2P_NET_CHUNKSIZE=524288 BRAID_STRIPING=equal braid)"
  shape "$RATE" "$SLOW"
  echo "slow braid $(braid)"
  echo "slow braid512 $(NCCL_P2P_NET_CHUNKSIZE=524288 braid)"
  echo "slow equal $(NCCL_P2P_NET_CHUNKSIZE=524288 BRAID_STRIPING=equal braid "" 3)"
done
shape "$RATE"
echo "cut braid $(NCCL_P2P_NET_CHUNKSIZE=524288 braid 'braid-fabric netem 2 a loss 100%; braid-fabric netem 2 b loss 100%' 20)"
grep -h "WARN" /tmp/b0 | grep -c "fenced" | sed 's/^/cut fences /'
EOF
raw=$(mktemp)
VM_TIMEOUT=${VM_TIMEOUT:-900} vm_run "verbs bench" "$guest
$guest_body" | tee "$raw" | grep -E "^(healthy|slow|cut) " || true
median() { sort -n | awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
m() { grep -E "^$1 $2 " "$raw" | awk '{print $3}' | grep -v fail | median; }
vals() { grep -E "^$1 $2 " "$raw" | awk '{printf "%s ", $3}'; }
r() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
mbit() { # netem rate -> Mbit/s
  awk -v v="$1" 'BEGIN {n = v + 0; u = tolower(v); sub(/^[0-9.]+/, "", u)
    if (u == "gbit") n *= 1000; else if (u == "kbit") n /= 1000; else if (u != "mbit") n = 0; print n}'
}
line_h=$(awk -v a="$(mbit "$RATE")" 'BEGIN {print 4 * a}')
line_s=$(awk -v a="$(mbit "$RATE")" -v b="$(mbit "$SLOW")" 'BEGIN {print 3 * a + b}')
cap_h=$(awk -v a="$(m rail rate)" 'BEGIN {printf "%.1f", 4 * a}')
cap_s=$(awk -v a="$(m rail rate)" -v b="$(m rail slow)" 'BEGIN {printf "%.1f", 3 * a + b}')
{
  echo "# braid verbs transport in the soft-RoCE guest (TCG), $(date -u +%Y-%m-%dT%H:%MZ): 4 rxe rails at $RATE (netem), rail 3 at $SLOW in the slow rows"
  echo "# medians of $ROUNDS interleaved rounds; Mbit/s of payload; raw values in brackets; line rate: what netem lets through, headers included (payload at most 0.946 of it)"
  printf '%-58s %8s   [%s]\n' "ib_write_bw alone on one rail at $RATE" "$(m rail rate)" "$(vals rail rate)"
  printf '%-58s %8s   [%s]\n' "ib_write_bw alone on one rail at $SLOW" "$(m rail slow)" "$(vals rail slow)"
  echo "# capacity: 4 x the first ($cap_h), or 3 x the first + the second ($cap_s); line rate $line_h / $line_s"
  row() { printf '%-58s %8s   %sx capacity, %sx line rate%s   [%s]\n' "$1" "$(m "$2" "$3")" "$(r "$(m "$2" "$3")" "$4")" "$(r "$(m "$2" "$3")" "$5")" "${6:-}" "$(vals "$2" "$3")"; }
  row "braid sendrecv --oneway 8M, healthy, 128 KiB pieces" healthy braid "$cap_h" "$line_h"
  row "braid sendrecv --oneway 8M, healthy, 512 KiB pieces" healthy braid512 "$cap_h" "$line_h"
  row "braid BRAID_STRIPING=equal, healthy, 512 KiB pieces" healthy equal "$cap_h" "$line_h"
  row "braid, rail 3 at $SLOW, 128 KiB pieces" slow braid "$cap_s" "$line_s"
  row "braid, rail 3 at $SLOW, 512 KiB pieces" slow braid512 "$cap_s" "$line_s" " (>= 0.90 of capacity)"
  row "braid BRAID_STRIPING=equal, rail 3 at $SLOW, 512 KiB" slow equal "$cap_s" "$line_s"
  printf '%-52s %s (fences logged: %s)\n' "rail 2 cut 3 s into a 20-iteration run" "$(grep -E '^cut braid' "$raw" | awk '{print ($3 == "fail") ? "FAILED" : "every iteration verified, " $3 " Mbit/s"}')" "$(grep -E '^cut fences' "$raw" | awk '{print $3}')"
} | tee "$out"
rm -f "$raw"
echo "# written to $out"
