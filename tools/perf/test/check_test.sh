#!/usr/bin/env bash
# braid-perf's check can fail (issue 19 item 7): through chaos-net's data faults
# (tools/perf/test/chaos_fault.h) a receive that the plugin reports complete is made, once, to
# hold what its buffer held before (a lost write) or what an earlier receive brought there (a
# write of the previous iteration left in place); braid-perf --check-all must count wrong
# elements and exit 1.  The fault lands in a timed iteration that is not the last: a check after
# the last iteration only, or one that reuses the input or does not re-poison the output between
# iterations, lets it pass (as braid-perf's --check-all did before).  Loopback, seconds.
#   BUILD=build tools/perf/test/check_test.sh      (PERF=... to try another braid-perf)
# Also: the closing "CPU per GB moved" line is a positive number its ranks' shares add up to.
# Prints "check: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../../.."
B=${BUILD:-build}
PERF=${PERF:-$B/braid-perf}
CHAOS=$(realpath "$B/libnccl-net-chaos.so")
export CHAOS_INNER=$(realpath "$B/libnccl-net-braid.so") CHAOS_PERCENT=0 BRAID_SOCKET_IFNAME=lo
unset CHAOS_DROP_RECV CHAOS_STALE_RECV
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; grep -v "^#\|NCCL INFO" "$tmp/out" | tail -n 12 | sed 's/^/     /'; }

# An 8 MiB oneway sendrecv in 128 KiB pieces: rank 1 completes 64 receives per operation, so
# receive 150 is in timed iteration 2 of 4 (after 64 of the warm-up and 64 of iteration 1).
ONEWAY=(sendrecv --oneway -n 2 -b 8M -e 8M -w 1 -i 4 --check-all)

perf() { timeout 120 "$PERF" --plugin "$CHAOS" --timeout 30 "$@" >"$tmp/out" 2>&1; }
wrong() { grep -o "Out of bounds values : [0-9]*" "$tmp/out" | grep -o "[0-9]*$"; }
fired() { grep -c "^chaos-net: CHAOS_" "$tmp/out"; }

# caught NAME VAR=N ARGS...: the fault fires and braid-perf exits 1 with wrong elements.
caught() {
  local name=$1 fault=$2 rc=0; shift 2
  env "$fault" timeout 120 "$PERF" --plugin "$CHAOS" --timeout 30 "$@" >"$tmp/out" 2>&1 || rc=$?
  if [ "$(fired)" -lt 1 ]; then bad "$name (the fault never fired)"
  elif [ $rc -ne 1 ]; then bad "$name (exit $rc, want 1: wrong results)"
  elif [ "$(wrong)" -gt 0 ] 2>/dev/null; then ok "$name ($(wrong) wrong)"
  else bad "$name (exit 1 but no wrong elements counted)"; fi
}

# Controls: the wrapper changes nothing by itself, and every iteration is counted as checked
# (rank 1 alone receives: 1 warm-up + 4 timed + 1 verify pass).
if perf "${ONEWAY[@]}" && [ "$(wrong)" = 0 ] &&
   grep -q "Outputs checked      : 6 (all ranks; every iteration)" "$tmp/out"; then
  ok "clean run through chaos-net: passes, 6 outputs checked"
else bad "clean run through chaos-net"; fi
if CHAOS_DROP_RECV=100000 perf "${ONEWAY[@]}" && [ "$(fired)" = 0 ]; then
  ok "a drop armed past the run's last receive: never fires, passes"
else bad "a drop armed past the run's end"; fi

# CPU per GB moved (issue 22): the closing line is there, its total is a positive finite number
# and the ranks' shares add up to it (each printed to 4 decimals); the JSON rows carry it.
# cpu_ok NAME ARGS...: runs braid-perf with --json and checks both.
cpu_ok() {
  local name=$1; shift
  if ! perf "$@" --json "$tmp/json"; then bad "CPU per GB: $name (the run failed)"; return; fi
  local line why
  line=$(grep "^# CPU per GB moved     : " "$tmp/out")
  why=$(echo "$line" | awk -v n="$NR_RANKS" '{
    sub(/^# CPU per GB moved     : /, ""); total = $1 + 0
    if ($1 !~ /^[0-9]+\.[0-9]+$/ || !(total > 0)) { print "total not a positive number: " $1; exit }
    if ($2 != "s") { print "no unit"; exit }
    ranks = 0; sum = 0
    for (i = 1; i <= NF; i++) if ($i == "rank") { ranks++; v = $(i + 2); sub(/[,;]$/, "", v); sum += v }
    if (ranks != n) { print ranks " ranks shown, want " n; exit }
    d = sum - total; if (d < 0) d = -d
    if (d > 0.0001 * (n + 1)) print "ranks sum to " sum ", total " total
  }')
  if [ -z "$line" ]; then bad "CPU per GB: $name (no CPU line)"
  elif [ -n "$why" ]; then bad "CPU per GB: $name ($why: $line)"
  elif ! grep -q '"cpu_s_per_GB": [0-9.]*[1-9]' "$tmp/json"; then bad "CPU per GB: $name (no positive cpu_s_per_GB in --json)"
  else ok "CPU per GB: $name (${line#*: })"; fi
}
NR_RANKS=2 cpu_ok "sendrecv --oneway, 2 ranks" "${ONEWAY[@]}"
NR_RANKS=3 cpu_ok "ring allreduce, 3 ranks, no --check-all" allreduce --algo ring -n 3 -b 1M -e 4M -f 4 -w 1 -i 4

caught "a receive's write lost in timed iteration 2 of 4 (registered buffer)" CHAOS_DROP_RECV=150 "${ONEWAY[@]}"
caught "a receive's write lost (through the staging slots)" CHAOS_DROP_RECV=150 "${ONEWAY[@]}" --staged
caught "iteration 1's bytes left in place of iteration 2's" CHAOS_STALE_RECV=150 "${ONEWAY[@]}"
caught "a stale receive in ring allreduce (3 ranks)" CHAOS_STALE_RECV=40 \
  allreduce --algo ring -n 3 -b 8M -e 8M -w 1 -i 4 --check-all
caught "a lost receive in tree allreduce, int64 prod (4 ranks)" CHAOS_DROP_RECV=150 \
  allreduce --algo tree -n 4 -b 8M -e 8M -d int64 -o prod -w 1 -i 4 --check-all
caught "a stale receive in allgather, 2 channels" CHAOS_STALE_RECV=20 \
  allgather -n 3 -b 6M -e 6M -c 2 -w 1 -i 4 --check-all

echo "check: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
