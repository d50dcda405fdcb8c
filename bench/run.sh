#!/usr/bin/env bash
# `make bench`: every benchmark, each printing what it measured beside its reference.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/deps.sh bench
./bench/p2p.sh "${BENCH_ROUNDS:-5}"
./bench/cpu.sh "${BENCH_ROUNDS:-3}"
./bench/threads.sh "${BENCH_ROUNDS:-3}"
if [ "$(id -u)" = 0 ]; then ./bench/multirail.sh "${BENCH_ROUNDS:-3}"; else echo "bench: multirail skipped (needs root)"; fi
if [ "$(id -u)" = 0 ]; then ./bench/ps_slow.sh "${BENCH_ROUNDS:-5}"; else echo "bench: ps_slow skipped (needs root)"; fi
if [ -x test/fuzz/run.sh ]; then ./test/fuzz/run.sh "${FUZZ_SECONDS:-300}"; fi
