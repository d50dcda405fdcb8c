#!/usr/bin/env bash
# The verbs transport's multi-rail figures in the soft-RoCE guest (tools/vm; root, qemu): rank 0
# on rxe_a0-3, rank 1 on rxe_b0-3, braid-perf sendrecv --oneway 8 MiB with BRAID_TRANSPORT=verbs,
# rails shaped with netem at RATE (default 25mbit: 100 Mbit/s in all, well below what rxe moves
# under software emulation, about 250), against the shaped rails' line rate, interleaved rounds:
#   healthy: braid / 4 x RATE, and BRAID_STRIPING=equal beside it;
#   rail 3 at SLOW (default a tenth of RATE): braid / (3 x RATE + SLOW), equal beside it;
#   a rail cut mid-run (loss 100% both ways on rail 2, 3 s in): every iteration verified.
# The line rate counts every byte netem sends: RoCE v2 headers (Ethernet, IP, UDP, BTH, ICRC: 58
# bytes per 1024-byte packet at rxe's MTU) leave at most 0.946 of it for payload.  (ib_write_bw
# is not used as the reference: under TCG, concurrent runs report 0 MB/s for some rails.)
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
  echo "healthy braid $(braid)"
  echo "healthy equal $(BRAID_STRIPING=equal braid)"
  shape "$RATE" "$SLOW"
  echo "slow braid $(braid)"
  echo "slow equal $(BRAID_STRIPING=equal braid)"
done
shape "$RATE"
echo "cut braid $(braid 'braid-fabric netem 2 a loss 100%; braid-fabric netem 2 b loss 100%' 20)"
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
{
  echo "# braid verbs transport in the soft-RoCE guest (TCG), $(date -u +%Y-%m-%dT%H:%MZ): 4 rxe rails at $RATE (netem), rail 3 at $SLOW in the slow rows"
  echo "# medians of $ROUNDS interleaved rounds; Mbit/s of payload; raw values in brackets; line rate: what netem lets through, headers included (payload at most 0.946 of it)"
  printf '%-52s %8s   %sx line rate %s   [%s]\n' "braid sendrecv --oneway 8M, healthy" "$(m healthy braid)" "$(r "$(m healthy braid)" "$line_h")" "$line_h" "$(vals healthy braid)"
  printf '%-52s %8s   %sx line rate %s   [%s]\n' "braid BRAID_STRIPING=equal, healthy" "$(m healthy equal)" "$(r "$(m healthy equal)" "$line_h")" "$line_h" "$(vals healthy equal)"
  printf '%-52s %8s   %sx line rate %s (>= 0.90)   [%s]\n' "braid, rail 3 at $SLOW" "$(m slow braid)" "$(r "$(m slow braid)" "$line_s")" "$line_s" "$(vals slow braid)"
  printf '%-52s %8s   %sx line rate %s   [%s]\n' "braid BRAID_STRIPING=equal, rail 3 at $SLOW" "$(m slow equal)" "$(r "$(m slow equal)" "$line_s")" "$line_s" "$(vals slow equal)"
  printf '%-52s %s (fences logged: %s)\n' "rail 2 cut 3 s into a 20-iteration run" "$(grep -E '^cut braid' "$raw" | awk '{print ($3 == "fail") ? "FAILED" : "every iteration verified, " $3 " Mbit/s"}')" "$(grep -E '^cut fences' "$raw" | awk '{print $3}')"
} | tee "$out"
rm -f "$raw"
echo "# written to $out"
