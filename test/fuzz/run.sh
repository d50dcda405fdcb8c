#!/usr/bin/env bash
# Builds the fuzzers (libFuzzer + ASan + UBSan) into build/fuzz/ and runs each for SECONDS
# (default 20), starting from its committed seeds (test/fuzz/corpus/<target>/, copied into
# build/fuzz/corpus/<target>/, never written back) so every run starts deep.  Exits non-zero if a
# target fails to build or finds a crash; reproducers are left in build/fuzz/artifacts/.  The
# summary gives each target's runs and the coverage it reached (libFuzzer's cov: edges, ft:
# features).  Run from anywhere:  test/fuzz/run.sh [SECONDS]   (FUZZ_TARGETS="fuzz_rx ...": only those)
# JOBS (default 2) targets are built, then run, at once: each fuzzer is one single-threaded
# process, so on 2 cores two of them get as many runs each in SECONDS as one alone.
set -euo pipefail

SECONDS_PER_TARGET=${1:-20}
if ! [[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] || [ "$SECONDS_PER_TARGET" -lt 1 ]; then
  echo "usage: $0 [SECONDS]   (positive integer, default 20)" >&2
  exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
CLANG=${CLANG:-clang}
OUT=build/fuzz
TARGETS=(fuzz_handle fuzz_hello fuzz_frame fuzz_raillist fuzz_transport_wire fuzz_ps_frames fuzz_rx fuzz_tx_ack fuzz_verbs_ctl
         fuzz_collnet_client)
declare -A MAX_LEN=([fuzz_handle]=128 [fuzz_hello]=80 [fuzz_frame]=40 [fuzz_raillist]=296 [fuzz_transport_wire]=300 [fuzz_ps_frames]=4096
                    [fuzz_rx]=4096 [fuzz_tx_ack]=4096 [fuzz_verbs_ctl]=2048
                    [fuzz_collnet_client]=2048) # decoder input sizes; a command script for the state machines
if [ -n "${FUZZ_TARGETS:-}" ]; then read -ra TARGETS <<<"$FUZZ_TARGETS"; fi
mkdir -p "$OUT/artifacts"

PS_ENGINE=(ps_offload/session.c ps_offload/conn.c ps_offload/proto.c ps_offload/auth.c ps_offload/reduce.c ps_offload/reduce_x86.c
           common/dynlib.c common/sodium_lib.c common/param.c common/log.c common/secret.c)
WIRE=(net_plugin/wire/*.c) # every wire format (net_plugin/wire/wire.h)
DATA_PATH=(net_plugin/stripe/rx.c net_plugin/stripe/tx.c net_plugin/stripe/sched.c net_plugin/transport/socket/ack_out.c
           "${WIRE[@]}" net_plugin/transport/socket/sock_stream.c net_plugin/transport/socket/sock_tx.c
           net_plugin/transport/socket/sock_rx.c net_plugin/transport/socket/sock_helper.c)
JOBS=${JOBS:-2}
# at_most_jobs: waits until fewer than JOBS of this script's background jobs run.
at_most_jobs() { while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done; }

build() { # target: its binary in $OUT, the compiler's messages in $OUT/$t.build.log
  local t=$1 srcs=("${WIRE[@]}") libs=() defs=()
  [ "$t" = fuzz_ps_frames ] && srcs=("${PS_ENGINE[@]}") libs=(-lpthread)
  # the data path's state machines over the socket stream transport, compiled in with stand-ins
  # for the rest (test/fuzz/net_stubs.c), on a clock the harness moves
  [ "$t" = fuzz_rx ] || [ "$t" = fuzz_tx_ack ] && srcs=(test/fuzz/net_stubs.c "${DATA_PATH[@]}") libs=(-lm) defs=(-DBRAID_CLOCK_FAKE)
  [ "$t" = fuzz_verbs_ctl ] && srcs=(test/fuzz/net_stubs.c test/verbs_proto/flush_none.c net_plugin/transport/verbs/verbs_conn.c net_plugin/transport/verbs/verbs_rejoin.c net_plugin/stripe/sched.c "${WIRE[@]}") libs=(-lm) # fake endpoint in the target
  [ "$t" = fuzz_collnet_client ] && srcs=(test/fuzz/net_stubs.c net_plugin/collnet/collnet_op.c net_plugin/collnet/collnet_rejoin.c ps_offload/assign.c ps_offload/proto.c
    ps_offload/reduce.c ps_offload/reduce_x86.c ps_offload/auth.c common/dynlib.c common/sodium_lib.c) libs=(-lm -ldl -lpthread)
  "$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -iquote common -iquote net_plugin -iquote ps_offload -iquote test/fuzz \
    "${defs[@]}" "test/fuzz/$t.c" "${srcs[@]}" -o "$OUT/$t" "${libs[@]}"
}
for t in "${TARGETS[@]}"; do
  at_most_jobs
  rm -f "$OUT/$t"
  build "$t" >"$OUT/$t.build.log" 2>&1 &
done
wait
built=1
for t in "${TARGETS[@]}"; do
  if [ ! -x "$OUT/$t" ]; then built=0; echo "$t: build failed:" >&2; cat "$OUT/$t.build.log" >&2; fi
done
[ "$built" = 1 ] || exit 1

fuzz() { # target: runs it, its output in $OUT/$t.log and its exit status in $OUT/$t.rc
  local t=$1 corpus="$OUT/corpus/$1" rc=0
  mkdir -p "$corpus"
  if [ -d "test/fuzz/corpus/$t" ]; then cp -n test/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true; fi
  "./$OUT/$t" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -max_len="${MAX_LEN[$t]}" \
    -artifact_prefix="$OUT/artifacts/$t-" "$corpus" >"$OUT/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$OUT/$t.rc"
}
for t in "${TARGETS[@]}"; do
  at_most_jobs
  rm -f "$OUT/$t.rc"
  fuzz "$t" &
done
wait

status=0
summary=()
for t in "${TARGETS[@]}"; do
  corpus="$OUT/corpus/$t"
  log="$OUT/$t.log"
  rc=$(cat "$OUT/$t.rc" 2>/dev/null || echo "?")
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -n 1 || true) # the last status line: DONE, or the last before a crash
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last") ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  if [ "$rc" != 0 ]; then
    status=1
    summary+=("$t: FAILED (exit $rc) after ${runs:-?} runs (cov ${cov:-?} ft ${ft:-?}); see $log and $OUT/artifacts/")
    grep -m 3 -E 'check failed|ERROR:|runtime error' "$log" >&2 || true
    grep -A 3 -E '^SUMMARY' "$log" >&2 || true
  else
    summary+=("$t: ok, ${runs:-?} runs in ${SECONDS_PER_TARGET}s, cov ${cov:-?} ft ${ft:-?}, corpus $(find "$corpus" -type f | wc -l) inputs")
  fi
done

printf '%s\n' "${summary[@]}"
exit "$status"
