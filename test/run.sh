#!/usr/bin/env bash
# `make test`: every test, in both builds (plain and ASan+UBSan), plus the fuzzers.
# Prints one line per suite (PASS, FAIL, or SKIP with the reason) and a closing "N passed, N
# failed, N skipped" line; exits non-zero on a failure (and on a skip with
# BRAID_TEST_REQUIRE_ALL=1, as in CI).  Each suite's output is in build/test-logs/SUITE.log.
#   test/run.sh                 every suite
#   test/run.sh SUITE...        only these (names or globs: unit 'vm-*'), plus the build suites
#                               they use; `make test SUITE="unit netbed"` is the same
#   test/run.sh --list          the suites' names, in order
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --list ]; then list_only=1; shift; else list_only=0; fi
[ "$list_only" = 1 ] || ./tools/deps.sh test || exit 1

JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-8} # per target here; `make fuzz` runs 20 s each
# BRAID_TEST_REQUIRE_ALL=1 (.ci/run sets it): a skipped suite or case fails the run.
REQUIRE_ALL=${BRAID_TEST_REQUIRE_ALL:-0}
pass=0 fail=0 skip=0 failed=() skipped=()
log_dir=build/test-logs
mkdir -p "$log_dir"

# A suite skips as a whole by printing "...: skipped (REASON)" and exiting 77; a case inside it
# by printing a line "skip CASE (REASON)"; GoogleTest prints "[  SKIPPED ]".  Either way the
# suite is reported SKIP with the reasons, never PASS.
suite() { # name, command...
  local name=$1; shift
  if [ "$mode" = collect ]; then names+=("$name"); return 0; fi
  [ -n "${run_set[$name]:-}" ] || return 0
  local log="$log_dir/$name.log" t0=$SECONDS rc=0 why
  "$@" >"$log" 2>&1 || rc=$?
  # (GoogleTest prints a skip's reason on the line after "FILE:LINE: Skipped": shown with the test.)
  why=$(awk '/^skip |: skipped \(/ { print; next } /: Skipped$/ { getline r; next }
             /^\[  SKIPPED \] [^0-9]/ { print $0 (r == "" ? "" : ": " r); r = "" }' "$log" |
          head -n 3 | tr '\n' ';' | sed 's/;$//')
  if [ $rc -eq 0 ] && [ -z "$why" ]; then
    pass=$((pass + 1)); printf 'PASS %-28s %4ds\n' "$name" $((SECONDS - t0))
  elif [ $rc -eq 0 ] || [ $rc -eq 77 ]; then
    skip=$((skip + 1)); skipped+=("$name"); printf 'SKIP %-28s %4ds  (%s)\n' "$name" $((SECONDS - t0)) "${why:-no reason printed}"
  else
    fail=$((fail + 1)); failed+=("$name"); printf 'FAIL %-28s %4ds  (log: %s)\n' "$name" $((SECONDS - t0)) "$log"
    tail -n 30 "$log" | sed 's/^/    /'
  fi
}

# Every suite, in the order they run.  A suite uses the builds its needs() names.
suites() {
suite deps-first ./test/integration/deps_first_test.sh
suite build make -j"$JOBS" all build/unit-tests build/gpu-stage-tests build/verbs-proto-tests build/libnccl-net-chaos.so \
  build/libnccl-net-collshm.so
suite build-sanitized make -j"$JOBS" SAN=1 OPT=-O1 BUILD=build/san build/san/libnccl-net-braid.so \
  build/san/braid-perf build/san/unit-tests build/san/libnccl-net-braidtrace.so build/san/braid-trace-shape \
  build/san/libnccl-net-chaos.so build/san/braid-ps build/san/libnccl-net-collshm.so \
  build/san/braid-tune build/san/libnccl-tuner-braid.so build/san/braid-verbs-conn-test build/san/gpu-stage-tests \
  build/san/net-consumer build/san/verbs-proto-tests
suite build-tsan make -j"$JOBS" SAN=thread OPT=-O1 BUILD=build/tsan build/tsan/threads-test build/tsan/braid-ps
suite threads-tsan env TSAN_OPTIONS=halt_on_error=1 ./build/tsan/threads-test
suite unit env BRAID_PLUGIN_PATH=build/libnccl-net-braid.so ./build/unit-tests
suite unit-sanitized env BRAID_PLUGIN_PATH=build/san/libnccl-net-braid.so ./build/san/unit-tests
# GPU memory on connections that carry host memory only, with a stand-in CUDA driver
# (test/gpu_stage): a verbs node and a socket-only peer.
suite gpu-staging ./build/gpu-stage-tests
suite gpu-staging-sanitized ./build/san/gpu-stage-tests
# The verbs connection's failover protocol over a scripted fabric (test/verbs_proto): the orders
# of events a real fabric produces only now and then, every time.
suite verbs-proto ./build/verbs-proto-tests
suite verbs-proto-sanitized ./build/san/verbs-proto-tests
suite config-doc ./test/integration/config_doc_test.sh build
suite source-layers tools/check/layers.sh
suite source-paths tools/check/paths.sh
suite integration ./test/integration/run.sh build
suite integration-sanitized ./test/integration/run.sh build/san
# The plugin as other consumers use it (test/consumer): every transport, three ranks.
suite consumer ./test/consumer/run.sh build
suite consumer-sanitized ./test/consumer/run.sh build/san
suite collnet ./test/integration/collnet_test.sh build
suite collnet-sanitized ./test/integration/collnet_test.sh build/san
# The servers under ThreadSanitizer, in the cases where they work concurrently.
suite collnet-tsan-servers env PS=build/tsan/braid-ps TSAN_OPTIONS=halt_on_error=1 \
  COLLNET_ONLY="collnet-float-sweep collnet-direct-3heads collnet-server-killed collnet-tampered-result-rerouted" \
  ./test/integration/collnet_test.sh build
suite collnet-driver env BUILD=build tools/perf/test/collnet_smoke.sh
suite perf-check-can-fail env BUILD=build tools/perf/test/check_test.sh
suite perf-check-can-fail-sanitized env BUILD=build/san tools/perf/test/check_test.sh
suite perf-mem env BUILD=build tools/perf/test/mem_test.sh refuse
suite perf-mem-sanitized env BUILD=build/san tools/perf/test/mem_test.sh refuse
suite perf-tclass env BUILD=build tools/perf/test/tclass_test.sh
suite perf-tclass-sanitized env BUILD=build/san tools/perf/test/tclass_test.sh
suite loads-anywhere ./test/integration/loads_anywhere_test.sh build
suite loads-anywhere-sanitized ./test/integration/loads_anywhere_test.sh build/san
suite tuner-driver env BUILD=build tools/perf/test/tuner_smoke.sh
suite nccl-compat ./test/integration/compat_test.sh build
suite tuner-driver-sanitized env BUILD=build/san tools/perf/test/tuner_smoke.sh
suite tune-tool env BUILD=build tools/tune/test/smoke.sh
suite tune-tool-sanitized env BUILD=build/san tools/tune/test/smoke.sh
suite sim ./test/sim/run.sh build
suite sim-sanitized ./test/sim/run.sh build/san SAN=1 OPT=-O1
suite netbed ./test/integration/netbed_test.sh build
# Under ASan/UBSan, the cases that take the failure paths (a rail cut and re-admitted, a reset
# rail rejoining, a rail down at set-up); striping, black-holing and the slow rail run plain.
suite netbed-sanitized env NETBED_ONLY="cut reset setup" ./test/integration/netbed_test.sh build/san
suite ofi ./test/integration/ofi_test.sh build
suite ofi-sanitized ./test/integration/ofi_test.sh build/san
# Over libfabric: striping and the failures whose detection differs there (the backup rail and
# the slow rail's demotion are the scheduler's, run over sockets above).
suite netbed-ofi env NETBED_TRANSPORT=ofi NETBED_ONLY="striping cut blackhole nic reset setup" ./test/integration/netbed_test.sh build
# The ofi rejoin (a new endpoint on both ends) under ASan+UBSan: a rail down at set-up joins
# later (the reset case needs every connection busy on rail 1 during the 0.3 s reset, which the
# slower sanitized build does not always give).
suite netbed-ofi-sanitized env NETBED_TRANSPORT=ofi NETBED_ONLY="setup" ./test/integration/netbed_test.sh build/san
# With two socket helper threads per connection (each owning two of the four rails' streams):
# striping, a rail cut and re-admitted, a reset rail rejoining, all from the helpers.
suite netbed-threads env BRAID_SOCKET_THREADS=2 NETBED_ONLY="striping cut reset" ./test/integration/netbed_test.sh build
# Installing: make install and make uninstall into a DESTDIR; the Debian packages (make deb,
# built in a copy into build/deb), lintian on them, and the packages in a fresh Debian root (as
# root; the root is bootstrapped once, like the guest's image, and cached in /var/cache/braid-vm).
suite install ./test/pkg/install_test.sh build
suite deb make deb
suite deb-lintian ./test/pkg/lintian_test.sh build/deb
suite deb-install ./test/pkg/deb_install_test.sh build/deb
# A copy of this tree in a minimal Debian root (debootstrap minbase, make and gcc), by chroot: make
# run, and make test's suites that a missing package or the chroot's limits touch; as root.
suite minimal-root ./test/pkg/min_root_test.sh
# The soft-RoCE guest's tests (smoke, verbs-probe, verbs-ep, verbs-conn plain and sanitized,
# verbs-perf), in one boot; test/vm/all.sh NAME... or test/vm/NAME_test.sh for one of them.
suite vm ./test/vm/all.sh
suite fuzz ./test/fuzz/run.sh "$FUZZ_SECONDS"
}

# The build suites whose trees a suite runs (the others build what they run themselves).
needs() {
  case $1 in
    deps-first|build|build-sanitized|build-tsan|fuzz|vm|sim|sim-sanitized|source-*|deb|minimal-root) ;;
    deb-*) echo deb;;
    threads-tsan) echo build-tsan;;
    collnet-tsan-servers) echo build build-tsan;;
    collnet-sanitized) echo build build-sanitized;; # build/braid-stat reads the heads' metrics
    *-sanitized) echo build-sanitized;;
    *) echo build;;
  esac
}

mode=collect names=()
suites
declare -A run_set=()
if [ $# -eq 0 ]; then
  for n in "${names[@]}"; do run_set[$n]=1; done
else
  for pat in "$@"; do
    hit=0
    for n in "${names[@]}"; do
      # shellcheck disable=SC2053 # a glob on purpose
      if [[ $n == $pat ]]; then
        hit=1 run_set[$n]=1
        for b in $(needs "$n"); do run_set[$b]=1; done
      fi
    done
    [ $hit = 1 ] || { echo "test/run.sh: no suite matches '$pat'; the suites are: ${names[*]}" >&2; exit 2; }
  done
fi
if [ "$list_only" = 1 ]; then
  for n in "${names[@]}"; do [ -n "${run_set[$n]:-}" ] && echo "$n"; done
  exit 0
fi
mode=run
suites

echo
[ ${#failed[@]} -gt 0 ] && echo "failed suites: ${failed[*]}"
[ ${#skipped[@]} -gt 0 ] && echo "skipped (not passed): ${skipped[*]}"
echo "$pass passed, $fail failed, $skip skipped"
if [ "$REQUIRE_ALL" = 1 ] && [ "$skip" -gt 0 ]; then
  echo "BRAID_TEST_REQUIRE_ALL=1: every suite must run here; install what the skipped ones name"
  exit 1
fi
[ "$fail" -eq 0 ]
