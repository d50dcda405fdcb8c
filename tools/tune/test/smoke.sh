#!/usr/bin/env bash
# braid-tune's command line, end to end: health merges advice files (and refuses bad ones with
# FILE:LINE and exit 1), explain prints a table, a summary and a chart, every --help works and
# bad usage exits 2.  BUILD names the build folder (default build; build/san for the sanitizers).
#   BUILD=build tools/tune/test/smoke.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
TUNE=${BUILD:-build}/braid-tune
[ -x "$TUNE" ] || { echo "no $TUNE: run make first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

advice() { # file host send_gbps slow_run
  cat >"$1" <<EOF
braid-advice 1
host $2
seconds 60.000
samples 12
send_gbps $3
rail 0 eth0 10.0.0.9:5000 $3 $3 $4 active
EOF
}
advice "$tmp/a.advice" h0 20.000 0
advice "$tmp/b.advice" h1 20.000 0
advice "$tmp/c.advice" h2 5.000 4

# health: to a file, atomically, parsed by the tuner's format rules.
"$TUNE" health -o "$tmp/health" "$tmp"/{a,b,c}.advice 2>"$tmp/err" ||
  fail "health: $(cat "$tmp/err")"
head -1 "$tmp/health" | grep -qx 'braid-health 1' || fail "health: first line"
grep -q '^h2 0.250' "$tmp/health" || fail "health: h2 should be 0.25: $(cat "$tmp/health")"
grep -q '^h0 1.000' "$tmp/health" || fail "health: h0 should be 1"
grep -q 'c.advice' "$tmp/health" || fail "health: the header names the inputs"
[ "$(ls "$tmp" | grep -c tmp)" = 0 ] || fail "health: a temporary file was left"
# ... and to standard output, the same text.
"$TUNE" health "$tmp"/{a,b,c}.advice >"$tmp/health2" 2>/dev/null
cmp -s "$tmp/health" "$tmp/health2" || fail "health: stdout differs from -o"

# A malformed advice file: FILE:LINE, exit 1, nothing written.
printf 'braid-advice 1\nhost h3\nseconds 1\nsamples x\nsend_gbps 1\n' >"$tmp/bad.advice"
set +e
"$TUNE" health -o "$tmp/none" "$tmp/a.advice" "$tmp/bad.advice" 2>"$tmp/err"; rc=$?
set -e
[ $rc = 1 ] || fail "health: bad input exited $rc, not 1"
grep -q "bad.advice:4:" "$tmp/err" || fail "health: no FILE:LINE in: $(cat "$tmp/err")"
[ ! -e "$tmp/none" ] || fail "health: wrote a file despite bad input"
set +e
"$TUNE" health "$tmp/missing.advice" 2>/dev/null; [ $? = 1 ] || fail "health: missing file"
"$TUNE" health 2>/dev/null; [ $? = 2 ] || fail "health: no files is bad usage"
"$TUNE" health --bogus "$tmp/a.advice" 2>/dev/null; [ $? = 2 ] || fail "health: unknown flag"
set -e

# explain: table, summary, note, chart. (fontconfig, under cairo, keeps 288 bytes of its
# configuration until exit; LeakSanitizer would count them against this run.)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$TUNE" explain --nranks 16 --nnodes 4 -b 1K -e 64M -f 4 --rules /dev/null --mode auto \
  --png "$tmp/chart.png" >"$tmp/out" 2>"$tmp/err" || fail "explain: $(cat "$tmp/err")"
grep -q '^ *64M ' "$tmp/out" || fail "explain: no 64M row"
grep -q '^summary:' "$tmp/out" || fail "explain: no summary"
grep -q 'CUDA graph' "$tmp/out" || fail "explain: no note on CUDA graphs"
[ "$(head -c 8 "$tmp/chart.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "explain: the chart is not a PNG"
# With a rule that differs from NCCL, the summary says so.
echo 'allreduce,0,65536,ring,simple,-1,-1,-1' >"$tmp/rules.csv"
"$TUNE" explain --nranks 8 --nnodes 2 -b 4K -e 1M --rules "$tmp/rules.csv" >"$tmp/out" 2>/dev/null
grep -q 'rule line 1' "$tmp/out" || fail "explain: the rule is not named"
grep -q 'braid differs from NCCL' "$tmp/out" || fail "explain: no difference summarised"
set +e
"$TUNE" explain --nnodes 2 >/dev/null 2>&1; [ $? = 2 ] || fail "explain: missing --nranks"
"$TUNE" explain --nranks 6 --nnodes 4 >/dev/null 2>&1; [ $? = 2 ] || fail "explain: uneven layout"
"$TUNE" explain --nranks 8 --mode fast >/dev/null 2>&1; [ $? = 2 ] || fail "explain: bad mode"
"$TUNE" explain --nranks 8 -b 1Q >/dev/null 2>&1; [ $? = 2 ] || fail "explain: bad size"
"$TUNE" bogus >/dev/null 2>&1; [ $? = 2 ] || fail "unknown command"
set -e

# Every --help lists every flag it accepts.
"$TUNE" --help | grep -q explain || fail "--help"
for f in --nranks --nnodes --ppn --mode --rules --calib --health --coll --minbytes --maxbytes \
         --stepfactor --link-gbs --channels --collnet --png --help; do
  "$TUNE" explain --help | grep -q -- "$f" || fail "explain --help lacks $f"
done
for f in --output --help; do
  "$TUNE" health --help | grep -q -- "$f" || fail "health --help lacks $f"
done
echo "braid-tune smoke: OK"
