#!/usr/bin/env bash
# braid-sim end to end: the 10,240-GPU scenario (every fault scenario, every algorithm, the
# scaling sweep) finishes in under a minute and writes a sane table, CSV and PNG; --help lists
# every config key; bad usage exits 2.  BUILD names the build folder (default build; build/san
# runs a 640-GPU case instead, the sanitizers being slow).
#   BUILD=build test/sim/smoke.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SIM=$BUILD/braid-sim
[ -x "$SIM" ] || { echo "no $SIM: run make $SIM first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

nodes=1280 limit=60
case "$BUILD" in *san*) nodes=80 limit=120 ;; esac
gpus=$((nodes * 8))

# Runs that draw the PNG: libfontconfig (under cairo's text) keeps caches that no call frees,
# so the leak checker is off for them; the run after the table checks leaks with no PNG.
nolsan() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$@"; }
# (Timed in shell arithmetic, milliseconds: nothing beyond coreutils, e.g. no bc.)
t0=$(date +%s%N)
nolsan "$SIM" --set nodes=$nodes --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/err" || fail "braid-sim: $(cat "$tmp/err")"
ms=$((($(date +%s%N) - t0) / 1000000))
secs=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
echo "braid-sim, $gpus GPUs, all scenarios and the sweep: ${secs} s"
[ "$ms" -lt $((limit * 1000)) ] || fail "took ${secs} s (limit $limit s)"

for f in table.txt results.csv scaling.csv busbw.png; do [ -s "$tmp/out/$f" ] || fail "no $f"; done
head -c 8 "$tmp/out/busbw.png" | od -An -tx1 | grep -q '89 50 4e 47' || fail "busbw.png is not a PNG"

# The CSV: 5 scenarios x 6 algorithms at $gpus GPUs; healthy rows at slowdown 1; every finite
# busbw positive and below the NVLink / network peaks; plain NCCL fails with a rail down, braid
# does not; braid loses less than plain NCCL to the slow NICs.
awk -F, -v g=$gpus '
  NR == 1 { next }
  { n++; if ($3 != g) bad = bad " gpus:" $3 }
  $1 == "healthy" && ($7 < 0.999 || $7 > 1.001) { bad = bad " healthy-slowdown:" $2 }
  $1 != "rail-down" || $2 ~ /braid/ { if (!($6 > 0 && $6 < 2000)) bad = bad " busbw:" $1 "/" $2 "=" $6 }
  $1 == "rail-down" && $2 !~ /braid/ && $6 != 0 { bad = bad " rail-down-ran:" $2 }
  $1 == "slow-nics" { slow[$2] = $7 }
  END {
    if (n != 30) bad = bad " rows:" n
    if (!(slow["braid-ring"] <= slow["ring"] && slow["braid-tree"] < slow["tree"])) bad = bad " braid-no-better"
    if (bad) { print bad; exit 1 }
  }' "$tmp/out/results.csv" || fail "results.csv: $(awk -F, -v g=$gpus 'NR>1' "$tmp/out/results.csv" | head -3)"
"$SIM" --set nodes=$nodes --set sweep=0 --quiet || fail "braid-sim without --out"
grep -q "rings simulated chunk by chunk" "$tmp/out/table.txt" || fail "table does not say what was simulated"
grep -q "delivered" "$tmp/out/table.txt" || fail "table has no rail simulation of braid's scheduler"
grep -q "^nodes = $nodes" "$tmp/out/table.txt" || fail "table does not state its configuration"
# The sweep: efficiency 1 at one node, every GPU count from 8 to $gpus.
grep -q "^healthy,ring,8,.*,1.0000$" "$tmp/out/scaling.csv" || fail "scaling.csv: no 8-GPU baseline"
grep -q "^healthy,braid-ring,$gpus," "$tmp/out/scaling.csv" || fail "scaling.csv: no $gpus-GPU row"

# Usage: --help names every key; bad input exits 2 with a reason.
"$SIM" --help >"$tmp/help"
for k in $("$SIM" --print-config | cut -d' ' -f1); do grep -q "^  $k " "$tmp/help" || fail "--help lacks $k"; done
set +e
"$SIM" --set nodes=0 >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] && grep -q "out of range" "$tmp/err" || fail "nodes=0 accepted"
"$SIM" --scenario nope >/dev/null 2>&1; [ $? -eq 2 ] || fail "--scenario nope accepted"
printf 'nodes = 4\nbogus line\n' >"$tmp/cfg"
"$SIM" --config "$tmp/cfg" >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] && grep -q "cfg:2:" "$tmp/err" || fail "bad config line not reported as FILE:LINE"
set -e
printf '# a small cluster\nnodes = 4 # four\nsweep = 0\n' >"$tmp/cfg"
nolsan "$SIM" --config "$tmp/cfg" --scenario healthy --algo ring --quiet --out "$tmp/small" || fail "config file run"
[ "$(wc -l <"$tmp/small/results.csv")" -eq 2 ] || fail "one scenario, one algorithm: one row"
echo "braid-sim smoke: ok"
