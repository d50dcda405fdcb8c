#!/usr/bin/env bash
# Builds the wire-format fuzzers (libFuzzer + ASan + UBSan) into build/fuzz/ and runs each for
# SECONDS (default 20).  Exits non-zero if a target fails to build or finds a crash; reproducers
# are left in build/fuzz/artifacts/.  Run from anywhere:  test/fuzz/run.sh [SECONDS]
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
TARGETS=(fuzz_handle fuzz_hello fuzz_frame fuzz_raillist fuzz_ps_frames)
declare -A MAX_LEN=([fuzz_handle]=128 [fuzz_hello]=80 [fuzz_frame]=40 [fuzz_raillist]=296 [fuzz_ps_frames]=4096) # decoder input sizes; a command script for fuzz_ps_frames
mkdir -p "$OUT/artifacts"

PS_ENGINE=(ps_offload/session.c ps_offload/conn.c ps_offload/proto.c ps_offload/auth.c ps_offload/reduce.c ps_offload/reduce_x86.c
           common/dynlib.c common/sodium_lib.c)
for t in "${TARGETS[@]}"; do
  srcs=(net_plugin/wire.c) libs=()
  [ "$t" = fuzz_ps_frames ] && srcs=("${PS_ENGINE[@]}") libs=(-lpthread)
  "$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -iquote common -iquote net_plugin -iquote ps_offload \
    "test/fuzz/$t.c" "${srcs[@]}" -o "$OUT/$t" "${libs[@]}"
done

status=0
summary=()
for t in "${TARGETS[@]}"; do
  corpus="$OUT/corpus/$t"
  log="$OUT/$t.log"
  mkdir -p "$corpus"
  rc=0
  "./$OUT/$t" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -max_len="${MAX_LEN[$t]}" \
    -artifact_prefix="$OUT/artifacts/$t-" "$corpus" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  if [ "$rc" -ne 0 ]; then
    status=1
    summary+=("$t: FAILED (exit $rc) after ${runs:-?} runs; see $log and $OUT/artifacts/")
    grep -m 3 -E 'check failed|ERROR:|runtime error' "$log" >&2 || true
    grep -A 3 -E '^SUMMARY' "$log" >&2 || true
  else
    summary+=("$t: ok, ${runs:-?} runs in ${SECONDS_PER_TARGET}s, corpus $(find "$corpus" -type f | wc -l) inputs")
  fi
done

printf '%s\n' "${summary[@]}"
exit "$status"
