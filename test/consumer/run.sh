#!/usr/bin/env bash
# The net plugin driven as NCCL's other consumers drive it (build/net-consumer: close right after
# completion, grouped and eager receives, a reused listen comm, two rings at once), 3 ranks on
# loopback, over every transport this machine has: TCP sockets (one stream, two streams, helper
# threads), libfabric's tcp provider (one stream, two streams), and an older ABI (v8) once.
# (verbs runs in the soft-RoCE guest: test/vm/.)  Prints "ok CONFIG CASE" / "FAIL ..." lines.
#   test/consumer/run.sh [BUILD]
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
DRIVER=$BUILD/net-consumer
PLUGIN=$BUILD/libnccl-net-braid.so
[ -x "$DRIVER" ] && [ -f "$PLUGIN" ] || { echo "consumer: $DRIVER or $PLUGIN missing (make)"; exit 1; }
export BRAID_SOCKET_IFNAME=lo BRAID_TIMEOUT_MS=10000
configs=(
  "sockets-1-stream|BRAID_TRANSPORT=socket BRAID_NSTREAMS=1|"
  "sockets-2-streams|BRAID_TRANSPORT=socket BRAID_NSTREAMS=2|"
  "sockets-helper-threads|BRAID_TRANSPORT=socket BRAID_SOCKET_THREADS=2|"
  "sockets-abi-v8|BRAID_TRANSPORT=socket BRAID_NSTREAMS=2|-v 8"
  "ofi-1-stream|BRAID_TRANSPORT=ofi FI_PROVIDER=tcp BRAID_NSTREAMS=1|"
  "ofi-2-streams|BRAID_TRANSPORT=ofi FI_PROVIDER=tcp BRAID_NSTREAMS=2|"
)
fails=0
for c in "${configs[@]}"; do
  IFS='|' read -r name vars args <<<"$c"
  log=$(mktemp)
  # shellcheck disable=SC2086
  env $vars timeout 600 "$DRIVER" -n 3 -i 10 $args "$PLUGIN" >"$log" 2>&1
  rc=$?
  grep -E '^(ok|FAIL) ' "$log" | sed "s/^\(ok\|FAIL\) /\1 $name /"
  if [ $rc -ne 0 ] || ! grep -q '^ok rings' "$log"; then
    fails=$((fails + 1))
    echo "FAIL $name (exit $rc); its log:"
    grep -v ' braid INFO ' "$log" | tail -n 15 | sed 's/^/    /'
  fi
  rm -f "$log"
done
echo "consumer: ${#configs[@]} configurations, $fails failed"
[ $fails -eq 0 ]
