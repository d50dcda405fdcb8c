#!/usr/bin/env bash
# `make run`: the main job on one machine.  With no cluster, four local ranks run an allreduce
# size sweep through the braid plugin over loopback and print the nccl-tests-style table: first
# NCCL's ring algorithm over braid's net plugin, then CollNet with two braid-ps summation servers
# started here (every result verified), then the braid tuner: a quick calibration of ring, tree
# and CollNet, and the sweep with the algorithm the tuner picks per size (braid-perf --algo auto).
# BRAID_DEMO_RANKS, BRAID_DEMO_ARGS override the defaults; BRAID_DEMO_COLLNET=0 skips the CollNet
# and tuner parts.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${BRAID_DEMO_RANKS:-4}
args=${BRAID_DEMO_ARGS:--b 8 -e 64M -f 4}
export NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN:-$PWD/build/libnccl-net-braid.so}
export BRAID_SOCKET_IFNAME=${BRAID_SOCKET_IFNAME:-lo}
echo "# braid demo: $ranks local ranks, ring allreduce through $NCCL_NET_PLUGIN over loopback"
# shellcheck disable=SC2086
./build/braid-perf allreduce --algo ring -n "$ranks" $args
[ "${BRAID_DEMO_COLLNET:-1}" = 0 ] && exit 0

# CollNet: two braid-ps servers on loopback, a throwaway token for this demo only.
export BRAID_PS_TOKEN=${BRAID_PS_TOKEN:-demo-$$-$RANDOM$RANDOM}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
list=""
for i in 0 1; do
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 30000))
    log=$(mktemp)
    ./build/braid-ps --listen "127.0.0.1:$port" --threads 1 >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 30); do grep -q listening "$log" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$log"
    if kill -0 "$pid" 2>/dev/null; then pids+=("$pid"); list+="${list:+,}127.0.0.1:$port"; break; fi
  done
done
export BRAID_PS_SERVERS=$list
echo
echo "# braid demo: the same sweep through braid's CollNet, summed by braid-ps servers at $list"
echo "# (on one machine the servers share the CPU with the ranks: this shows it working, not its speed)"
# shellcheck disable=SC2086
./build/braid-perf allreduce --algo collnet -n "$ranks" $args

echo
echo "# braid demo: the tuner. A quick calibration (ring, tree x LL/LL128/Simple, CollNet), then"
echo "# the sweep with what libnccl-tuner-braid.so picks at each size from NCCL's cost table"
calib=$(mktemp)
trap 'kill "${pids[@]}" 2>/dev/null; rm -f "$calib"' EXIT
./build/braid-perf allreduce -n "$ranks" -b 4K -e 4M -f 4 -w 2 --iters 10 --repeats 1 \
  --calibrate "$calib" | awk '/calibration summary/,/# wrote/'
# shellcheck disable=SC2086
# The tuner uses a file only when every rank is given its fingerprint (braid-tune pin).
export NCCL_TUNER_PLUGIN=$PWD/build/libnccl-tuner-braid.so BRAID_TUNER_CALIB=$calib
export "$(./build/braid-tune pin 2>/dev/null)"
echo "# $BRAID_TUNER_PIN pins the calibration (braid-tune pin)"
./build/braid-perf allreduce --algo auto -n "$ranks" -b 4K -e 4M -f 4
