#!/usr/bin/env bash
# `make run`: the main job on one machine.  With no cluster, four local ranks run an allreduce
# size sweep through the braid plugin over loopback and print the nccl-tests-style table.
# BRAID_DEMO_RANKS, BRAID_DEMO_ARGS override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${BRAID_DEMO_RANKS:-4}
export NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN:-$PWD/build/libnccl-net-braid.so}
export BRAID_SOCKET_IFNAME=${BRAID_SOCKET_IFNAME:-lo}
echo "# braid demo: $ranks local ranks, ring allreduce through $NCCL_NET_PLUGIN over loopback"
# shellcheck disable=SC2086
exec ./build/braid-perf allreduce --algo ring -n "$ranks" ${BRAID_DEMO_ARGS:--b 8 -e 64M -f 4}
