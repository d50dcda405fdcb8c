#!/usr/bin/env bash
# `make bench`: every benchmark, each printing what it measured beside its reference.
set -euo pipefail
cd "$(dirname "$0")/.."
./bench/p2p.sh "${BENCH_ROUNDS:-5}"
if [ -x test/fuzz/run.sh ]; then ./test/fuzz/run.sh "${FUZZ_SECONDS:-300}"; fi
