#!/usr/bin/env bash
# braid-trace end to end: braid-perf runs through libnccl-net-braidtrace.so wrapping
# libnccl-net-braid.so and still verifies its results; every trace holds each kind of call; two
# identical runs have one shape, and a run with another p2p chunk size has another
# (braid-trace-shape --compare).  Only loopback carries traffic; a few seconds (each run is
# bounded to 20 s).
#   test/integration/trace_test.sh BUILD_DIR      (build or build/san)
# Prints "trace_test: N passed, M failed"; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=$(realpath "${1:-build}")
PERF=$B/braid-perf
TRACE=$B/libnccl-net-braidtrace.so
INNER=$B/libnccl-net-braid.so
SHAPE=$B/braid-trace-shape
[ -x "$SHAPE" ] || SHAPE=$(realpath build)/braid-trace-shape # the tool does not load plugins
for f in "$PERF" "$TRACE" "$INNER" "$SHAPE"; do
  [ -e "$f" ] || { echo "trace_test: $f is missing (run make)"; echo "trace_test: 0 passed, 1 failed"; exit 1; }
done
export BRAID_SOCKET_IFNAME=lo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { # name [file to show]
  fail=$((fail + 1)); echo "FAIL $1"
  if [ -n "${2:-}" ] && [ -f "$2" ]; then tail -n 20 "$2" | sed 's/^/     /'; fi
}

# traced NAME PERF-ARGS...: braid-perf through the wrapper; traces in $tmp/NAME/, output in
# $tmp/NAME.out.  Extra environment comes from the caller (VAR=x traced ...).
traced() {
  local name=$1; shift
  mkdir -p "$tmp/$name"
  NCCL_NET_PLUGIN="$TRACE" BRAID_TRACE_INNER="$INNER" BRAID_TRACE_FILE="$tmp/$name/trace.%p" \
    timeout 20 "$PERF" "$@" >"$tmp/$name.out" 2>&1
}

# run_ok NAME PERF-ARGS...: the traced run exits 0 (braid-perf verified every result).
run_ok() {
  local name=$1
  if traced "$@"; then ok "$name: braid-perf verifies through the wrapper"
  else bad "$name: braid-perf exit $?" "$tmp/$name.out"; fi
}

# has_calls NAME RANKS: one trace per rank, each with every kind of call, and a shape with no
# errors and every send matched to a receive of its tag.
has_calls() {
  local name=$1 ranks=$2 missing="" files
  files=$(find "$tmp/$name" -type f -name 'trace.*' | sort)
  if [ "$(echo "$files" | grep -c .)" -ne "$ranks" ]; then
    bad "$name: $(echo "$files" | grep -c .) trace files for $ranks ranks"; return
  fi
  for f in $files; do
    head -n 1 "$f" | grep -q '^# braid-trace 1 ' || missing+=" $(basename "$f"):header"
    for call in load init devices props listen connect accept regmr isend irecv test deregmr \
                close_send close_recv close_listen finalize; do
      grep -q "^[0-9.]* T[0-9]* $call " "$f" || missing+=" $(basename "$f"):$call"
    done
    grep -q ' test .* done=1 ' "$f" || missing+=" $(basename "$f"):test-done"
  done
  "$SHAPE" "$tmp/$name" >"$tmp/$name.shape" 2>&1 || missing+=" shape(exit $?)"
  grep -q '^errors: 0$' "$tmp/$name.shape" || missing+=" errors"
  grep -q 'unmatched-sends=0 unmatched-recvs=0 tag-mismatch=0' "$tmp/$name.shape" ||
    missing+=" matching"
  if [ -z "$missing" ]; then ok "$name: traces hold every call, no errors, all sends matched"
  else bad "$name: missing:$missing" "$tmp/$name.shape"; fi
}

# compare A B WANT: braid-trace-shape --compare exits WANT (0 same shape, 1 different).
compare() {
  local a=$1 b=$2 want=$3 rc=0
  "$SHAPE" --compare "$tmp/$a" "$tmp/$b" >"$tmp/cmp.$a.$b" 2>&1 || rc=$?
  local what="same shape"; [ "$want" = 1 ] && what="different shape"
  if [ "$rc" = "$want" ]; then ok "$a vs $b: $what"
  else bad "$a vs $b: --compare exit $rc, want $want ($what)" "$tmp/cmp.$a.$b"; fi
}

# The wrapper exports the net tables only: NCCL would take a tuner or CollNet from it unasked.
if command -v nm >/dev/null; then
  syms=$(nm -D --defined-only "$TRACE" | awk '$2 ~ /^[DdBbRr]$/ || $2 == "T" {print $3}' |
         grep -v '^_' | sort | tr '\n' ' ' || true)
  want="ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 ncclNetPlugin_v7 ncclNetPlugin_v8 ncclNetPlugin_v9 "
  if [ "$syms" = "$want" ]; then ok "exports ncclNetPlugin_v7..v12 only"
  else echo "exported: $syms" >"$tmp/syms"; bad "exports" "$tmp/syms"; fi
fi

sr=(sendrecv -n 2 -b 1M -e 4M -f 2 --iters 5 -w 1)
ar=(allreduce --algo ring -n 3 -b 1M -e 4M -f 2 --iters 5 -w 1)
run_ok sendrecv-1 "${sr[@]}"
has_calls sendrecv-1 2
run_ok sendrecv-2 "${sr[@]}"
compare sendrecv-1 sendrecv-2 0
export NCCL_P2P_NET_CHUNKSIZE=524288
run_ok sendrecv-512k "${sr[@]}"
unset NCCL_P2P_NET_CHUNKSIZE
compare sendrecv-1 sendrecv-512k 1
if grep -q '^  send sizes:' "$tmp/cmp.sendrecv-1.sendrecv-512k"; then ok "the diff names the send sizes"
else bad "the diff does not name the send sizes" "$tmp/cmp.sendrecv-1.sendrecv-512k"; fi
run_ok allreduce-1 "${ar[@]}"
has_calls allreduce-1 3
run_ok allreduce-2 "${ar[@]}"
compare allreduce-1 allreduce-2 0
compare sendrecv-1 allreduce-1 1

# NCCL's optional receive completion: braid-perf hints its LL receives as NCCL 2.24+ does; the
# trace marks each hinted irecv (opt=1) and the shape counts exactly the receives braid-perf
# hinted; without the hint, none.
ll=(allreduce --algo ring --proto LL -n 3 -b 4 -e 64K -f 16 --iters 3 -w 1)
for h in 1 0; do
  NCCL_NET_OPTIONAL_RECV_COMPLETION=$h run_ok "ll-hint$h" "${ll[@]}"
  want=$(sed -n 's/.*; \([0-9]*\) irecvs posted with the optional-completion hint.*/\1/p' "$tmp/ll-hint$h.out")
  "$SHAPE" "$tmp/ll-hint$h" >"$tmp/ll-hint$h.shape" 2>&1 || true
  got=$(sed -n 's/^recv optional-completion: //p' "$tmp/ll-hint$h.shape")
  if [ -n "$want" ] && [ "$got" = "$want" ] && { [ "$h" = 0 ] || [ "$want" -gt 0 ]; } && { [ "$h" = 1 ] || [ "$want" = 0 ]; }; then
    ok "ll-hint$h: the shape counts $got hinted receives, as braid-perf posted"
  else bad "ll-hint$h: shape counts ${got:-?} hinted receives, braid-perf posted ${want:-?}" "$tmp/ll-hint$h.shape"; fi
done

# Every ABI version the wrapper exports forwards as the newest does.
for v in 7 10; do
  run_ok "abi-v$v" --net-version "$v" "${sr[@]}"
  if grep -q " init ctx=x1 abi=v$v " "$tmp/abi-v$v"/trace.*; then ok "abi-v$v: init logged as v$v"
  else bad "abi-v$v: no 'init ... abi=v$v' line" "$(find "$tmp/abi-v$v" -name 'trace.*' | head -n 1)"; fi
done
compare sendrecv-1 abi-v7 0

# No BRAID_TRACE_FILE: the trace goes to stderr.
if NCCL_NET_PLUGIN="$TRACE" BRAID_TRACE_INNER="$INNER" timeout 20 "$PERF" sendrecv -n 2 -b 1K \
     -e 1K --iters 1 -w 0 >"$tmp/stderr.out" 2>&1 && grep -q '^# braid-trace 1 ' "$tmp/stderr.out" &&
   grep -q ' isend comm=c' "$tmp/stderr.out"; then
  ok "no BRAID_TRACE_FILE: trace on stderr"
else bad "no BRAID_TRACE_FILE: trace on stderr" "$tmp/stderr.out"; fi

# A wrapped plugin that cannot be loaded fails the run with a message naming it.
if NCCL_NET_PLUGIN="$TRACE" BRAID_TRACE_INNER=no-such-plugin BRAID_TRACE_FILE="$tmp/bad.%p" \
     timeout 20 "$PERF" sendrecv -n 2 -b 1K -e 1K --iters 1 -w 0 >"$tmp/bad.out" 2>&1; then
  bad "missing inner plugin: exit 0" "$tmp/bad.out"
elif grep -q 'BRAID_TRACE_INNER=no-such-plugin' "$tmp/bad.out"; then
  ok "missing inner plugin fails, naming BRAID_TRACE_INNER"
else bad "missing inner plugin: no message naming BRAID_TRACE_INNER" "$tmp/bad.out"; fi

# braid-trace-shape refuses what is not a trace.
echo "hello" >"$tmp/not-a-trace"
rc=0; "$SHAPE" "$tmp/not-a-trace" >"$tmp/shape.out" 2>&1 || rc=$?
if [ "$rc" = 2 ]; then ok "braid-trace-shape: not a trace -> exit 2"
else bad "braid-trace-shape: not a trace -> exit $rc" "$tmp/shape.out"; fi

echo "trace_test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
