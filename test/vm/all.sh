#!/usr/bin/env bash
# Every guest test of test/vm/ in one boot of the soft-RoCE test guest (make test's vm suite).
# Each test script prepares its files and its guest script exactly as when it runs alone (then
# it boots a guest of its own: test/vm/verbs_perf_test.sh), but hands them to this script
# (VM_BATCH, test/vm/lib.sh); one guest then runs them in turn, each
#   - on the fabric as /init left it: links up, no qdiscs, every rail's routes, rxe ports ACTIVE
#     (the tests take links down, black-hole and slow rails);
#   - in a fresh /tmp, from its own share folder, under its own timeout (VM_TIMEOUT as alone);
# and prints "vm: NAME passed (S s)" or "vm: FAIL: NAME ..." with the end of that test's output.
# Booting the guest under TCG takes about 20 s, once instead of once per test.
#   test/vm/all.sh [NAME...]     NAME: smoke verbs-probe verbs-ep verbs-conn verbs-conn-sanitized
#                                verbs-perf verbs-gpu consumer-verbs (default: all, in that order)
# Prints "vm: skipped (REASON)" and exits 77 where no guest can be booted (as test/vm/smoke.sh).
#   (environment: BRAID_VM_CACHE, BRAID_VM_ACCEL)
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/vm/lib.sh

# NAME SCRIPT [VAR=VALUE...]: the environment the script is prepared with (BUILD, and SAN/OPT for
# make in test/vm/lib.sh when the build is the sanitized one).
all=(
  "smoke smoke.sh"
  "verbs-probe verbs_probe_test.sh"
  "verbs-ep verbs_ep_test.sh"
  "verbs-conn verbs_conn_test.sh"
  "verbs-conn-sanitized verbs_conn_test.sh BUILD=build/san SAN=1 OPT=-O1"
  "verbs-perf verbs_perf_test.sh"
  "verbs-gpu verbs_gpu_test.sh"
  "consumer-verbs consumer_test.sh"
)
names=()
for t in "${all[@]}"; do names+=("${t%% *}"); done
want=("$@")
[ $# -gt 0 ] || want=("${names[@]}")
for w in "${want[@]}"; do
  [[ " ${names[*]} " == *" $w "* ]] || { echo "vm: no guest test '$w' (tests: ${names[*]})" >&2; exit 2; }
done

vm_image
batch=$(mktemp -d "${TMPDIR:-/tmp}/braid-vm-batch.XXXXXX")
trap 'rm -rf "$batch"' EXIT
order=() total=0
for t in "${all[@]}"; do
  read -r name script vars <<<"$t"
  [[ " ${want[*]} " == *" $name "* ]] || continue
  # shellcheck disable=SC2086 # vars: VAR=VALUE words
  if ! env VM_BATCH="$batch" VM_BATCH_NAME="$name" $vars "test/vm/$script" >"$batch/$name.prep" 2>&1 ||
     [ ! -s "$batch/$name/test.sh" ]; then
    cat "$batch/$name.prep"
    echo "vm: FAIL: $name: preparing its files on the host failed"
    exit 1
  fi
  order+=("$name")
  total=$((total + $(cat "$batch/$name/timeout")))
done
printf '%s\n' "${order[@]}" >"$batch/order"

# ---- run in the guest: each test in turn, on a reset fabric, in a fresh /tmp ------------------
read -r -d '' driver <<'EOF' || true
set -uo pipefail
reset_fabric() {
  local r n=$BRAID_VM_RAILS
  for r in $(seq 0 $((n - 1))); do
    ip link set "va$r" up; ip link set "vb$r" up
    braid-fabric clear "$r"
  done
  braid-fabric route
  for _ in $(seq 100); do
    grep -qv ACTIVE /sys/class/infiniband/rxe_*/ports/1/state || return 0
    sleep 0.1
  done
  echo "braid-vm-test: fabric not ACTIVE again:"; grep . /sys/class/infiniband/rxe_*/ports/1/state
  return 1
}
failed=0
while read -r name; do
  echo "braid-vm-test: BEGIN $name"
  t0=$(date +%s%N) rc=0
  if ! reset_fabric; then rc=125
  else
    mounted=0
    mount -t tmpfs -o size=256m tmpfs /tmp && mounted=1
    (cd "/host/$name" && timeout --kill-after=5 "$(cat timeout)" bash test.sh </dev/null) || rc=$?
    [ "$mounted" = 0 ] || umount -l /tmp
  fi
  ms=$((($(date +%s%N) - t0) / 1000000))
  echo "braid-vm-test: END $name $rc $((ms / 1000)).$((ms % 1000 / 100))"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
done </host/order
exit "$failed"
EOF

rc=0
tools/vm/run.sh --cache "$cache" --share "$batch" --timeout $((total + 120)) -- bash -c "$driver" \
  >"$batch/console" 2>&1 || rc=$?
# The console, each test's part marked BEGIN/END by the driver, goes to the log as it was.
tr -d '\r' <"$batch/console"
echo
failed=0
for name in "${order[@]}"; do
  end=$(grep -a "^braid-vm-test: END $name " "$batch/console" | tail -n 1 || true)
  if [ -z "$end" ]; then
    failed=$((failed + 1))
    echo "vm: FAIL: $name did not finish (the guest stopped: run.sh exit $rc)"
    continue
  fi
  read -r _ _ _ trc took <<<"$end"
  if [ "$trc" = 0 ]; then echo "vm: $name passed ($took s)"
  else
    failed=$((failed + 1))
    echo "vm: FAIL: $name exited $trc ($took s); its last lines:"
    sed -n "/^braid-vm-test: BEGIN $name\$/,/^braid-vm-test: END $name /p" "$batch/console" | tr -d '\r' |
      tail -n 25 | sed 's/^/    /'
  fi
done
echo "vm: ${#order[@]} guest tests in one boot (image: $build_note), $failed failed; $(grep -a -o 'init after .*total [0-9.]* s' "$batch/console" | tail -n 1)"
[ "$failed" -eq 0 ] && [ "$rc" -eq 0 ]
