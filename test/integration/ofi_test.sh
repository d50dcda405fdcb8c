#!/usr/bin/env bash
# The ofi transport (libfabric, tcp provider) on loopback, through braid-perf (every result
# verified): single and striped connections, ring and tree allreduce, and the set-up errors a
# user can make (no such provider, a bad BRAID_TRANSPORT, verbs asked for where there is no RDMA
# device, ranks that disagree on the transport).
#   test/integration/ofi_test.sh BUILD_DIR
# Prints "ofi: N passed, N failed".  The multi-rail and rail-failure cases run on the netbed
# (NETBED_TRANSPORT=ofi test/integration/netbed_test.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
PERF=$B/braid-perf
PLUGIN=$(realpath "$B/libnccl-net-braid.so")
export NCCL_SOCKET_IFNAME=lo FI_PROVIDER=tcp NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
unset BRAID_TRANSPORT
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; tail -n 15 "$tmp/out" | sed 's/^/     /'; }

# verified NAME GREP ARGS...: a braid-perf run that must pass and log GREP.
verified() {
  local name=$1 want=$2; shift 2
  if timeout 120 "$PERF" "$@" --plugin "$PLUGIN" --timeout 30 >"$tmp/out" 2>&1 &&
     grep -q "Out of bounds values : 0 OK" "$tmp/out" && grep -q -- "$want" "$tmp/out"; then
    ok "$name"
  else bad "$name"; fi
}

export BRAID_TRANSPORT=ofi
verified "sendrecv over ofi (tcp provider), 0 B .. 16 MiB" "transport: libfabric, provider tcp" \
  sendrecv -n 2 -b 0 -e 16M -f 8 -w 1 -i 3
BRAID_NSTREAMS=2 verified "striped over 2 streams with acknowledgements" "2 streams" \
  sendrecv -n 2 -b 0 -e 16M -f 8 -c 2 -w 1 -i 3
verified "ring allreduce, 3 ranks" "libfabric" allreduce --algo ring -n 3 -b 0 -e 4M -f 8 -w 1 -i 3

# NCCL's trafficClass (issue 32): libfabric's providers take no IP or GRH class, so the data
# cannot carry it; braid says so in one WARN per process (two ranks: two lines, though each rank
# makes and accepts connections on 2 channels, 2 streams each) and the run goes on.
tcwarn="traffic class 104 (NCCL's trafficClass) is not carried over libfabric (tcp"
BRAID_NSTREAMS=2 verified "trafficClass over ofi: not carried, said once per process" "$tcwarn" \
  sendrecv -n 2 -b 0 -e 1M -f 8 -c 2 -w 1 -i 2 --traffic-class 104
n=$(grep -c "is not carried over libfabric" "$tmp/out")
if [ "$n" = 2 ]; then ok "  ... exactly one WARN per rank"; else bad "  ... $n WARN lines, want 2 (one per rank)"; fi
BRAID_NSTREAMS=3 verified "tree allreduce, 4 ranks, 3 streams" "libfabric" \
  allreduce --algo tree -n 4 -b 4 -e 4M -f 9 -d int64 -o min -w 1 -i 3

# The plugin never sets NCCL's variables (issue 18): NCCL's own 128 KiB pieces stay.
verified "NCCL's pieces stay NCCL's 128 KiB over ofi" \
  "network pieces (Simple): 131072 bytes" sendrecv -n 2 -b 4M -e 4M -w 1 -i 2
NCCL_P2P_NET_CHUNKSIZE=524288 verified "NCCL_P2P_NET_CHUNKSIZE=524288 over ofi" \
  "network pieces (Simple): 524288 bytes" sendrecv -n 2 -b 4M -e 4M -w 1 -i 2

# rxm's eager limit is the user's (braid sets no variable): frames above it go by rxm's
# rendezvous, each into a receive the receiver posted and granted before (ofi_rx.c).
FI_OFI_RXM_EAGER_LIMIT=1024 verified "rxm's rendezvous for nearly every frame (eager limit 1 KiB)" \
  "transport: libfabric" sendrecv -n 2 -b 0 -e 16M -f 4 -w 1 -i 3

unset BRAID_TRANSPORT
verified "auto keeps TCP sockets when libfabric's best is its own tcp" \
  "transport: TCP sockets (auto: libfabric's best provider here is tcp" sendrecv -n 2 -b 1M -e 1M -w 1 -i 2

# refused NAME GREP ENV...: the run must fail (not hang) and say GREP.
refused() {
  local name=$1 want=$2; shift 2
  if env "$@" timeout 60 "$PERF" sendrecv -n 2 -b 1M -e 1M -w 1 -i 2 --plugin "$PLUGIN" --timeout 20 \
       >"$tmp/out" 2>&1; then
    bad "$name (the run passed)"
  elif grep -q -- "$want" "$tmp/out"; then ok "$name"
  else bad "$name (no \"$want\")"; fi
}
refused "BRAID_TRANSPORT=ofi with no such provider: init fails and says why" \
  "BRAID_TRANSPORT=ofi, but libfabric cannot be used" BRAID_TRANSPORT=ofi FI_PROVIDER=nosuch
refused "a bad BRAID_TRANSPORT is refused" "invalid configuration: BRAID_TRANSPORT" BRAID_TRANSPORT=rdma
# (the verbs transport itself runs in the soft-RoCE guest: test/vm/verbs_perf_test.sh)
if ls /sys/class/infiniband/* >/dev/null 2>&1; then
  echo "skip BRAID_TRANSPORT=verbs without RDMA devices (this machine has some)"
else
  refused "BRAID_TRANSPORT=verbs with no RDMA device: init fails and says why" \
    "BRAID_TRANSPORT=verbs, but no RDMA port can be used" BRAID_TRANSPORT=verbs
fi

# Ranks that disagree: the listener drops the connection with the reason; nobody hangs.
port=$((30000 + RANDOM % 20000))
args=(sendrecv --oneway -b 1M -e 1M -w 1 -i 2 --timeout 20 --nranks 2 --rendezvous 127.0.0.1:$port
      --plugin "$PLUGIN")
BRAID_TRANSPORT=socket timeout 60 "$PERF" "${args[@]}" --rank 1 >"$tmp/r1" 2>&1 & p1=$!
BRAID_TRANSPORT=ofi timeout 60 "$PERF" "${args[@]}" --rank 0 >"$tmp/r0" 2>&1 & p0=$!
wait $p0; rc0=$?; wait $p1; rc1=$?
cat "$tmp/r0" "$tmp/r1" >"$tmp/out"
if [ $rc0 -ne 0 ] && [ $rc0 -ne 124 ] && [ $rc1 -ne 124 ] && grep -q "set BRAID_TRANSPORT alike" "$tmp/out"; then
  ok "ranks on different transports: refused with the reason, no hang"
else bad "ranks on different transports (exits $rc0 $rc1)"; fi

# Ranks with different BRAID_CHUNK_BYTES: over ofi_rxm frames are at most 512 KiB (the receives
# posted ahead hold that much) whatever it says, so a larger value on one side still runs.
port=$((30000 + RANDOM % 20000))
args=(sendrecv --oneway -b 4M -e 4M -w 1 -i 2 --timeout 20 --nranks 2 --rendezvous 127.0.0.1:$port
      --plugin "$PLUGIN")
BRAID_TRANSPORT=ofi timeout 60 "$PERF" "${args[@]}" --rank 1 >"$tmp/r1" 2>&1 & p1=$!
BRAID_TRANSPORT=ofi BRAID_CHUNK_BYTES=4M timeout 60 "$PERF" "${args[@]}" --rank 0 >"$tmp/r0" 2>&1 & p0=$!
wait $p0; rc0=$?; wait $p1; rc1=$?
cat "$tmp/r0" "$tmp/r1" >"$tmp/out"
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/r0"; then
  ok "BRAID_CHUNK_BYTES larger on the sender: frames stay within what the receiver posts, verified"
else bad "BRAID_CHUNK_BYTES differing (exits $rc0 $rc1)"; fi

echo "ofi: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
