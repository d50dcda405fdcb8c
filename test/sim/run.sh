#!/usr/bin/env bash
# braid-sim's suite: builds braid-sim and sim-tests into BUILD (with any make variables given),
# runs the model and scheduler-equivalence tests, then the end-to-end smoke test.
#   test/sim/run.sh build
#   test/sim/run.sh build/san SAN=1 OPT=-O1
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
shift || true
make -j"${JOBS:-2}" BUILD="$BUILD" "$@" "$BUILD/braid-sim" "$BUILD/sim-tests"
"$BUILD/sim-tests"
BUILD="$BUILD" test/sim/smoke.sh
