#!/usr/bin/env bash
# getCollInfo's cost in-process (build/tuner-latency), side by side in one run:
#   braid, mode off; braid with no inputs (NCCL's choice); braid scanning 17 rules that do not
#   match; braid's model with a calibration and a slow node; and, when NCCL_EXAMPLE_TUNER names a
#   build of NCCL's example tuner (plugins/tuner/example in NCCL's sources), that tuner with its
#   own 17-line example config. Target: braid's median under 100 ns.
# Usage: [NCCL_EXAMPLE_TUNER=path/libnccl-tuner-example.so] bench/tuner_latency.sh
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build/tuner-latency build/libnccl-tuner-braid.so >/dev/null
T=$(realpath build/libnccl-tuner-braid.so)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 17 rules for 16-node jobs, which a 4-node communicator never matches: a full scan per call.
for i in $(seq 1 17); do echo "allreduce,$((i * 1024)),$((i * 4096)),ring,simple,-1,16,-1"; done >"$tmp/rules"
# A calibration for the benchmark's communicator (32 ranks on 4 nodes): 3 algorithms, 12 sizes.
{
  echo "braid-calibration 1"; echo "nranks 32"; echo "nnodes 4"; echo "link_gbs 50"
  for a in tree ring collnet_chain; do
    for k in $(seq 10 2 32); do echo "allreduce $a simple $((1 << k)) $((k * 10 + 7)) $((k * 9))"; done
  done
} >"$tmp/calib"
printf 'braid-health 1\nh0 1\nh1 0.25\nh2 1\nh3 1\n' >"$tmp/health"
L=build/tuner-latency
unset BRAID_TUNER_CALIB BRAID_TUNER_HEALTH BRAID_TUNER_MODE
echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores; $(uname -r)"
BRAID_TUNER_MODE=off NCCL_TUNER_CONFIG_FILE=/nonexistent $L "braid-off=$T"
NCCL_TUNER_CONFIG_FILE=/nonexistent $L "braid-no-inputs=$T" | tail -n 1
NCCL_TUNER_CONFIG_FILE=$tmp/rules $L "braid-17-rules-scan=$T" | tail -n 1
NCCL_TUNER_CONFIG_FILE=/nonexistent BRAID_TUNER_CALIB=$tmp/calib BRAID_TUNER_HEALTH=$tmp/health \
  $L "braid-model=$T" | tail -n 1
if [ -n "${NCCL_EXAMPLE_TUNER:-}" ]; then
  ex_conf=$(dirname "$NCCL_EXAMPLE_TUNER")/nccl_tuner.conf
  [ -f "$ex_conf" ] || ex_conf=$tmp/rules
  NCCL_TUNER_CONFIG_FILE=$ex_conf $L "nccl-example=$NCCL_EXAMPLE_TUNER" | tail -n 1
fi
