#!/bin/sh
# braid-perf --algo collnet smoke: NCCL's CollNet chain allreduce over the collshm test plugin
# (libnccl-net-collshm.so: allreduce between local processes through POSIX shared memory, 5% of
# iallreduce calls answered with a NULL request). Every result is verified after every
# iteration (--check-all); sizes run from one element to 64 MiB, with several types, ops and
# channel counts (more than 8 channels: two iallreduce groups per step). Then the failure paths
# must fail cleanly: exit status 2 and a clear message. --algo CollNetDirect runs the same way
# with several heads per rank (node), each its own CollNet communicator. CollNet allgather and
# reducescatter are refused (collshm's iallgather/ireducescatter are NULL, as braid's are).
# Exits non-zero on any failure.
#   BUILD=build/san tools/perf/test/collnet_smoke.sh     (the sanitizer build)
set -u
B=${BUILD:-build}
PERF=$B/braid-perf
PLUGIN=$(cd "$B" && pwd)/libnccl-net-collshm.so
P="--plugin $PLUGIN"
fail=0
[ -x "$PERF" ] && [ -f "$PLUGIN" ] || { echo "FAIL: build $PERF and $PLUGIN first"; exit 1; }

# Leading VAR=value arguments of run/refuse go to the environment of that run only (through
# env: shells differ on whether `VAR=x function` outlives the call).
# run [VAR=value...] ARGS...: must exit 0 (all results right)
run() {
  envs=
  while case ${1:-} in *=*) true ;; *) false ;; esac do envs="$envs $1"; shift; done
  if out=$(env $envs "$PERF" "$@" --timeout 60 -w 1 -i 2 --check-all 2>&1); then
    echo "ok  $envs $*"
  else
    echo "FAIL$envs $* (exit $?)"
    echo "$out" | tail -15
    fail=1
  fi
}

# refuse PATTERN [VAR=value...] ARGS...: must exit 2 with PATTERN in the output
refuse() {
  pat=$1
  shift
  envs=
  while case ${1:-} in *=*) true ;; *) false ;; esac do envs="$envs $1"; shift; done
  out=$(env $envs "$PERF" "$@" --timeout 30 -w 0 -i 1 2>&1)
  rc=$?
  if [ "$rc" -eq 2 ] && echo "$out" | grep -q "$pat"; then
    echo "ok  $envs $* (fails as it should: $pat)"
  else
    echo "FAIL$envs $* (wanted exit 2 and \"$pat\", got exit $rc)"
    echo "$out" | tail -10
    fail=1
  fi
}

# One element to 64 MiB.
run allreduce --algo collnet -n 4 $P -d float -o sum -b 4 -e 64M -f 4
run allreduce --algo collnet -n 4 $P -d int32 -o prod -b 4 -e 64M -f 16
run allreduce --algo collnet -n 4 $P -d int8 -o min -b 1 -e 8M -f 9
run allreduce --algo collnet -n 4 $P -d uint8 -o sum -b 1 -e 1M -f 33
run allreduce --algo collnet -n 4 $P -d double -o max -b 8 -e 16M -f 8
run allreduce --algo collnet -n 4 $P -d int64 -o sum -b 8 -e 4M -f 13
run allreduce --algo collnet -n 4 $P -d uint64 -o prod -b 8 -e 2M -f 17
run allreduce --algo collnet -n 4 $P -d uint32 -o max -b 4 -e 2M -f 31
# Channels: the op's channel count and chunk change with the size (NCCL's tuning); 12 channels
# give two groups of iallreduces; odd sizes leave partial chunks and empty channels.
run allreduce --algo collnet -n 4 $P -c 1 -d float -o min -b 3K -e 9M -f 7
run allreduce --algo collnet -n 4 $P -c 8 -d int32 -o sum -b 4 -e 64M -f 64
run allreduce --algo collnet -n 3 $P -c 12 -d float -o sum -b 100 -e 40M -f 5
run allreduce --algo collnet -n 2 $P -c 32 -d double -o prod -b 1M -e 48M -f 6
run allreduce --algo collnet -n 1 $P -d float -b 4 -e 1M -f 64
# NCCL's spellings and buffer size; a NULL-request storm; --algo collnet implies allreduce.
run NCCL_ALGO=CollNetChain allreduce -n 4 $P -c 4 -b 1K -e 8M -f 8
run NCCL_BUFFSIZE=1M --algo collnet -n 4 $P -c 3 -b 4 -e 8M -f 16
run COLLSHM_NULL_PERCENT=60 --algo collnet -n 4 $P -c 2 -d int64 -o max -b 8 -e 4M -f 32
# Older CollNet tables through collload: v10 (size_t count, init once per process, no ctx)
# and v8 (int count), next to net v8.
run --algo collnet -n 3 $P --net-version 10 -c 3 -d float -o max -b 4 -e 16M -f 16
run --algo collnet -n 3 $P --net-version 8 -c 9 -d int32 -o sum -b 4 -e 16M -f 16
json=$(mktemp)
run --algo collnet -n 2 $P -b 4K -e 64K -f 4 --json "$json"
grep -q '"algo": "collnet"' "$json" || { echo "FAIL --json has no collnet records"; fail=1; }
rm -f "$json"
# CollNetDirect: head h of channel c carries chunk c*heads+h of each step; every head has its own
# collComm, shared buffer and proxy, all in flight at once. 8 heads x 12 channels: two
# iallreduce groups per head; a small NCCL_BUFFSIZE keeps the 8 x 2 x 12 buffers small and the
# chunks at one slot. The default is one head per CollNet device (collshm has one).
run --algo CollNetDirect --heads 2 -n 3 $P -c 3 -d float -o sum -b 4 -e 64M -f 8
run --algo CollNetDirect --heads 3 -n 2 $P -c 5 -d int32 -o max -b 4 -e 9M -f 7
run NCCL_BUFFSIZE=512K --algo CollNetDirect --heads 8 -n 2 $P -c 12 -d double -o sum -b 8 -e 16M -f 9
run COLLSHM_NULL_PERCENT=60 --algo CollNetDirect --heads 4 -n 3 $P -c 2 -d int64 -o min -b 8 -e 4M -f 32
run --algo CollNetDirect --heads 2 -n 3 $P --net-version 8 -c 9 -d uint8 -o sum -b 1 -e 2M -f 33
run NCCL_ALGO=CollNetDirect allreduce -n 2 $P -b 1K -e 1M -f 32
json=$(mktemp)
run --algo CollNetDirect --heads 2 -n 2 $P -b 4K -e 64K -f 4 --json "$json"
grep -q '"algo": "collnet_direct"' "$json" || { echo "FAIL --json has no collnet_direct records"; fail=1; }
rm -f "$json"

# Failure paths.
refuse "CollNet unavailable: devices()" COLLSHM_DEVICES=0 --algo collnet -n 3 $P
refuse "CollNet connect failed" COLLSHM_FAIL_CONNECT=1 --algo collnet -n 3 $P
refuse "CollNet unavailable for float sum" COLLSHM_UNSUPPORTED=7 --algo collnet -n 3 $P
refuse "allreduce only" sendrecv --algo collnet -n 2 $P
refuse "CollNet (ncclCollNetPlugin_v11) offers allreduce only: its iallgather is NULL" allgather --algo collnet -n 2 $P
refuse "offers allreduce only: its ireducescatter is NULL" reducescatter --algo CollNetDirect --heads 2 -n 2 $P
refuse "needs --algo CollNetDirect" allreduce --heads 2 -n 2 $P
refuse "bad --heads" --algo CollNetDirect --heads 9 -n 2 $P
refuse "Simple protocol only" --algo collnet --proto LL -n 2 $P
if [ -f "$B/libnccl-net-chaos.so" ]; then
  refuse "no ncclCollNetPlugin" CHAOS_INNER="$PLUGIN" --algo collnet -n 2 \
    --plugin "$(cd "$B" && pwd)/libnccl-net-chaos.so"
fi
exit $fail
