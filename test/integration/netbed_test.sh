#!/usr/bin/env bash
# Multi-rail behaviour on the netbed (needs root: network namespaces): 2 hosts x 4 rails, shaped.
#   test/integration/netbed_test.sh BUILD_DIR
# - striping: a verified run uses every rail;
# - a rail cut, and separately a rail black-holed, in the middle of a run: every iteration
#   verified, no error, the rail reported down, then re-admitted after restore;
# - a slowed rail is demoted.
# Prints "netbed: N passed, N failed"; skips (exit 77, "netbed: skipped (REASON)") where it
# cannot run.
# NETBED_TRANSPORT=ofi runs the cases over the ofi transport (libfabric, tcp provider): a failed
# rail stays down for the connection's life there (no rejoin), so the restore, reset-rejoin and
# join-later cases check that the run completes on the survivors instead.
# NETBED_ONLY=WORD runs only the cases whose key contains WORD (keys: striping cut blackhole
# backup reset setup slow), e.g. NETBED_ONLY=reset to repeat one case; NETBED_LOGS=DIR keeps the
# full logs of both ranks of each failure there (default BUILD_DIR/test-logs/netbed[-ofi]/).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
NETBED_LOGS=${NETBED_LOGS:-$B/test-logs/netbed${NETBED_TRANSPORT:+-$NETBED_TRANSPORT}}
rm -f "$NETBED_LOGS"/fail*.r[01] 2>/dev/null
NB=test/netbed/netbed.sh
if [ "$(id -u)" != 0 ]; then echo "netbed: skipped (needs root)"; exit 77; fi
for t in ip tc nft; do
  command -v $t >/dev/null || { echo "netbed: skipped ($t missing)"; exit 77; }
done
P=nt$$
tmp=$(mktemp -d)
cleanup() { $NB --prefix $P down >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
if ! $NB --prefix $P up --hosts 2 --rails 4 --rate 200mbit >"$tmp/up" 2>&1; then
  echo "netbed: skipped (cannot build the fabric: $(tail -n 1 "$tmp/up"))"; exit 77
fi
PERF=$(realpath "$B/braid-perf")
export NCCL_NET_PLUGIN=$(realpath "$B/libnccl-net-braid.so") BRAID_SOCKET_IFNAME=eth
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
OFI=0
if [ "${NETBED_TRANSPORT:-socket}" = ofi ]; then
  OFI=1
  export BRAID_TRANSPORT=ofi FI_PROVIDER=tcp
else
  export BRAID_TRANSPORT=socket
fi
pass=0 fail=0 timing=""
ONLY=${NETBED_ONLY:-}
want() { [ -z "$ONLY" ] || [[ $1 == *"$ONLY"* ]]; }
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() {
  fail=$((fail + 1)); echo "FAIL $1"
  [ -n "$timing" ] && echo "     ($timing)"
  echo "     --- rank 0 (sender):"; tail -n 25 "$tmp/r0" | sed 's/^/     /'
  echo "     --- rank 1 (receiver):"; tail -n 15 "$tmp/r1" | sed 's/^/     /'
  mkdir -p "$NETBED_LOGS" && cp "$tmp/r0" "$NETBED_LOGS/fail$fail.r0" && cp "$tmp/r1" "$NETBED_LOGS/fail$fail.r1" &&
    echo "     (full logs: $NETBED_LOGS/fail$fail.r0 and .r1)"
}

# wait_connected LOG N: until LOG shows N connections made (at most 20 s; prints how long).
wait_connected() {
  local t0=$SECONDS
  until [ "$(grep -c "NET/braid : connected to" "$1")" -ge "$2" ] || [ $((SECONDS - t0)) -ge 20 ]; do
    sleep 0.1
  done
  timing="the sender's $2 connections were made $((SECONDS - t0)) s after start; the fault came $([ $OFI = 1 ] && echo 2.5 || echo 1) s later"
}

# run NAME FAULT_CMD...: a 2-rank oneway run host 0 -> host 1; FAULT_CMD runs 1 s after both
# channels are connected, restore 2 s later; passes when both ranks exit 0 (every iteration
# verified).
run() {
  local name=$1 fault=$2 port=$((30000 + RANDOM % 20000))
  timing=""
  local args=(sendrecv --oneway -b 8M -e 8M -w 1 --iters 60 --timeout 30 --nranks 2
              --rendezvous 10.77.0.1:$port)
  $NB --prefix $P exec 1 "$PERF" "${args[@]}" --rank 1 >"$tmp/r1" 2>&1 & local p1=$!
  $NB --prefix $P exec 0 "$PERF" "${args[@]}" --rank 0 >"$tmp/r0" 2>&1 & local p0=$!
  local nic=1
  [ "$fault" = cut0 ] && fault=cut nic=0
  # Faults are timed from when the sender's two channels are connected, so they land while data
  # flows (over ofi, opening the provider's endpoints takes seconds on this machine).  Over ofi
  # they come 1.5 s later still: a rail's first rate sample there includes the provider's set-up,
  # and until later samples correct it a cut of a device's only carrying rail is not detected for
  # seconds (no other rail makes it LATE; a known gap, see docs/design.md, ofi).
  [ -n "$fault" ] && wait_connected "$tmp/r0" 2 && [ $OFI = 1 ] && sleep 1.5
  if [ "$fault" = reset ]; then # kill rail 1's TCP connections (SOCK_DESTROY): a reset
    sleep 2; $NB --prefix $P exec 0 ss -K dst 10.77.1.2 >/dev/null 2>&1
  elif [ -n "$fault" ]; then
    sleep 1; $NB --prefix $P "$fault" 0 $nic >/dev/null
    sleep 2; $NB --prefix $P restore 0 $nic >/dev/null
  fi
  wait $p0; local rc0=$?
  wait $p1; local rc1=$?
  if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/r0"; then
    return 0
  fi
  echo "     rank exits $rc0 $rc1" >>"$tmp/r0"
  return 1
}

if ! want striping; then :
elif run striping ""; then
  if ! grep -q "4 rails" "$tmp/r0"; then bad "4-rail striping (not on 4 rails)"
  elif [ $OFI = 1 ] && ! grep -q "transport: libfabric" "$tmp/r0"; then bad "4-rail striping (not over libfabric)"
  elif grep "closed connection" "$tmp/r0" | grep -q "eth[0-3] 0.0 MB"; then
    bad "4-rail striping (a rail carried nothing)"
  else ok "4-rail striping, verified"; fi
else bad "4-rail striping"; fi

for fault in cut blackhole; do
  want $fault || continue
  if run "$fault" "$fault"; then
    if grep -q "rail 1 (eth1).*-> down" "$tmp/r0"; then
      ok "rail $fault mid-run: every iteration verified, rail 1 taken down"
    else bad "rail $fault mid-run (rail 1 never reported down)"; fi
    if [ $OFI = 1 ]; then :
    elif grep -q "rail 1 (eth1).*down -> probing" "$tmp/r0"; then
      ok "rail $fault restored: rail 1 re-admitted"
    else bad "rail $fault restored (rail 1 not re-admitted)"; fi
  else bad "rail $fault mid-run"; fi
done

# Single-NIC devices (BRAID_RAILS=eth0;eth1;...) with a borrowed backup rail: the device's own
# NIC is cut mid-run; the run completes over the neighbour's NIC.
if ! want backup; then :
elif BRAID_RAILS="eth0;eth1;eth2;eth3" BRAID_BACKUP_RAIL=1 run backup cut0; then
  if grep -q "rail 0 (eth0).*-> down" "$tmp/r0"; then ok "single-NIC device: own NIC cut, completed over the borrowed rail"
  else bad "backup rail (rail 0 never reported down)"; fi
else bad "backup rail"; fi

# A rail whose TCP connection is reset mid-run reconnects and carries again (over ofi: the
# provider's connection is reset; the rail fails over and the run completes on the others).
if ! want reset; then :
elif [ $OFI = 1 ]; then
  if run reset reset; then
    if grep -q "rail 1 (eth1).*-> down\|send stream 1 (rail 1, eth1)" "$tmp/r0"; then ok "rail reset mid-run: verified, completed on the other rails"
    elif ! grep -q "eth1" "$tmp/r0"; then echo "skip rail reset (ss -K killed nothing here)"
    else ok "rail reset mid-run: verified"; fi
  else bad "rail reset mid-run"; fi
elif run reset reset; then
  if grep -q "send stream 1 (rail 1, eth1).*reconnected" "$tmp/r0" &&
     grep -q "receive stream 1 (rail 1, eth1).*rejoined" "$tmp/r1"; then
    ok "rail reset mid-run: verified, reconnected and rejoined"
  elif ! grep -q "eth1.*abort\|eth1.*reset" "$tmp/r0" "$tmp/r1"; then
    echo "skip rail reset (ss -K killed nothing here: no SOCK_DESTROY in this kernel)"
  else bad "rail reset (no reconnect)"; fi
else bad "rail reset mid-run"; fi

# A rail that is down when the connection is set up: the connection starts on the other three,
# and the rail joins once it is restored (not over ofi: no rejoin there).
if want setup && [ $OFI = 0 ]; then
  port=$((30000 + RANDOM % 20000))
  $NB --prefix $P cut 0 1 >/dev/null
  args=(sendrecv --oneway -b 8M -e 8M -w 1 --iters 80 --timeout 30 --nranks 2 --rendezvous 10.77.0.1:$port)
  $NB --prefix $P exec 1 "$PERF" "${args[@]}" --rank 1 >"$tmp/r1" 2>&1 & p1=$!
  $NB --prefix $P exec 0 "$PERF" "${args[@]}" --rank 0 >"$tmp/r0" 2>&1 & p0=$!
  sleep 4; $NB --prefix $P restore 0 1 >/dev/null
  wait $p0; rc0=$?; wait $p1; rc1=$?
  if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/r0" &&
     grep -q "send stream 1 (rail 1, eth1).*reconnected" "$tmp/r0" &&
     grep -q "receive stream 1 (rail 1, eth1).*rejoined" "$tmp/r1"; then
    ok "a rail down at set-up: started on the others, joined when restored"
  else echo "     rank exits $rc0 $rc1" >>"$tmp/r0"; bad "a rail down at set-up joins later"; fi
fi

# A rail at a tenth of the rate: demoted (degraded), never failed, and no healthy rail ever taken
# down; every iteration verified.  A failure prints the rail events with their times.
if want slow; then
  $NB --prefix $P shape 0 2 20mbit >/dev/null
  why=""
  if ! run slow ""; then why="the run failed"
  elif ! grep -q "rail 2 (eth2).*-> degraded" "$tmp/r0"; then why="rail 2 never demoted"
  elif grep -q "rail [0-3] (eth[0-3]).*-> down" "$tmp/r0"; then why="a rail was taken down"
  fi
  if [ -z "$why" ]; then ok "a rail at a tenth of the rate is demoted, no rail taken down, verified"
  else
    bad "slow rail demoted ($why)"
    echo "     --- rail events (sender), with their times:"
    grep "NET/braid : rail [0-9]" "$tmp/r0" | sed 's/.*NET\/braid : /     /' | head -n 40
  fi
fi

echo "netbed${NETBED_TRANSPORT:+ ($NETBED_TRANSPORT)}: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
