#!/usr/bin/env bash
# Multi-rail behaviour on the netbed (needs root: network namespaces): 2 hosts x 4 rails, shaped.
#   test/integration/netbed_test.sh BUILD_DIR
# - striping: a verified run uses every rail;
# - a rail cut, and separately a rail black-holed, in the middle of a run: every iteration
#   verified, no error, the rail reported down, then re-admitted after restore;
# - a NIC reset mid-run (rail 2's link down, its TCP connections destroyed with ss -K, link back):
#   the rail carries data again (counted on its interface);
# - a rail's TCP connections reset mid-run: the rail's stream reconnects on every connection,
#   the receiver takes it back, the rail's counters show the failover and data through the rail
#   after it (over ofi too: both ends open the stream's endpoint anew);
# - a slowed rail is demoted.
# Every run is braid-perf --check-all: each iteration its own data, a poisoned output, checked
# (the count of checked outputs is asserted, so a run that checked less fails).
# Prints "netbed: N passed, N failed"; skips (exit 77, "netbed: skipped (REASON)") where it
# cannot run.
# NETBED_TRANSPORT=ofi runs the cases over the ofi transport (libfabric, tcp provider): the same
# checks, but for the restore after a cut or black hole (an ofi stream that only stalled is not
# closed, so nothing reconnects: the rail comes back when its acknowledgements flow again).
# NETBED_ONLY=WORD runs only the cases whose key contains WORD (keys: striping cut blackhole
# backup nic reset setup slow), e.g. NETBED_ONLY=reset to repeat one case; NETBED_LOGS=DIR keeps the
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
# The fabric's hosts are network namespaces; ip netns exec also needs a slave mount namespace.
why=$(test/ns_check.sh --net --mount --propagation slave) ||
  { echo "netbed: skipped (the fabric's network namespaces: $why)"; exit 77; }
P=nt$$
tmp=$(mktemp -d)
cleanup() { $NB --prefix $P down >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
if ! $NB --prefix $P up --hosts 2 --rails 4 --rate 200mbit >"$tmp/up" 2>&1; then
  echo "netbed: skipped (cannot build the fabric: $(grep -v 'up failed' "$tmp/up" | tail -n 1))"; exit 77
fi
PERF=$(realpath "$B/braid-perf")
export NCCL_NET_PLUGIN=$(realpath "$B/libnccl-net-braid.so") BRAID_SOCKET_IFNAME=eth
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
OFI=0
if [ "${NETBED_TRANSPORT:-socket}" = ofi ]; then
  OFI=1
  export BRAID_TRANSPORT=ofi FI_PROVIDER=tcp
  # rxm's eager limit stays libfabric's own (16 KiB), as in a job: frames above it go by rxm's
  # rendezvous, which crashed the receiver in the reset case (libfabric 1.17, rxm_handle_rndv)
  # while a payload could arrive before its receive was posted.
  unset FI_OFI_RXM_EAGER_LIMIT
else
  export BRAID_TRANSPORT=socket
fi
pass=0 fail=0 timing=""
# NETBED_ONLY="striping cut reset ...": only the cases whose names contain one of these words
# (test/run.sh's netbed-sanitized: the cases that take braid's failure paths).
ONLY=${NETBED_ONLY:-}
want() {
  [ -z "$ONLY" ] && return 0
  local w
  for w in $ONLY; do [[ $1 == *"$w"* ]] && return 0; done
  return 1
}
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

# every_iteration_checked LOG ITERS: rank 0's LOG says the run checked every iteration of a
# 1-size run with one warm-up (rank 1 alone receives: 1 + ITERS + 1 outputs).
every_iteration_checked() {
  grep -q "Outputs checked      : $(($2 + 2)) (all ranks; every iteration)" "$1"
}

# metrics_now: the sender's BRAID_METRICS_FILE as last written (not the writer's temporary file,
# metrics.PID.tmp.XXXXXX, which is renamed over it: catching both would count every
# connection twice).
metrics_now() {
  local f
  for f in "$tmp"/metrics.*; do [[ $f == *.tmp.* ]] || cat "$f"; done 2>/dev/null
}

# rail_metric METRIC RAIL [FILES]: "PEER VALUE" per connection, from the sender's
# BRAID_METRICS_FILE (default: the last one written, metrics_now).
rail_metric() {
  local m=$1 r=$2; shift 2
  [ $# -gt 0 ] || { metrics_now >"$tmp/now"; set -- "$tmp/now"; }
  sed -n "s/^$m{.*,peer=\"\([^\"]*\)\",rail=\"$r\",.*} \([0-9]*\)\$/\1 \2/p" "$@" 2>/dev/null
}

# after_reset LOG0: waits (<= 15 s) until every connection of the sender has its rail 1 back
# (reconnected), then 0.5 s more (metrics every 100 ms), and keeps the
# sender's metrics as $tmp/mid; mid_alive=1 when the run was still going then.
after_reset() {
  local want t0=$SECONDS pat="send stream 1 (rail 1, eth1) to .* reconnected"
  want=$(grep -c "NET/braid : connected to" "$1")
  until [ "$(grep -c "$pat" "$1")" -ge "$want" ] || [ $((SECONDS - t0)) -ge 15 ]; do sleep 0.1; done
  sleep 0.5
  metrics_now >"$tmp/mid"
  mid_alive=0
  kill -0 "$p0" 2>/dev/null && mid_alive=1
  timing+="; rail 1 back on $(grep -c "$pat" "$1") of $want connections $((SECONDS - t0)) s after the reset"
}

# run NAME FAULT_CMD...: a 2-rank oneway run host 0 -> host 1 (ITERS iterations, default 60);
# FAULT_CMD runs 1 s after both channels are connected, restore 2 s later; passes when both
# ranks exit 0 and every iteration was checked and right.
run() {
  local name=$1 fault=$2 port=$((30000 + RANDOM % 20000)) iters=${ITERS:-60}
  timing=""
  local args=(sendrecv --oneway -b 8M -e 8M -w 1 --iters "$iters" --check-all --timeout 30 --nranks 2
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
  if [ "$fault" = nicreset ]; then
    # Rail 2 of host 0 as a NIC or driver reset leaves it: the link down and its TCP
    # connections destroyed (ss -K: the provider's and the set-up sockets alike), then the link
    # back 2 s later.  Host 0's eth2 transmit counter is kept from the restore on.
    sleep 1; $NB --prefix $P cut 0 2 --admin >/dev/null
    $NB --prefix $P exec 0 ss -K -t state connected src 10.77.2.1 >/dev/null 2>&1
    sleep 2; $NB --prefix $P restore 0 2 >/dev/null
    $NB --prefix $P exec 0 cat /sys/class/net/eth2/statistics/tx_bytes >"$tmp/tx_restored"
  elif [ "$fault" = reset ]; then # reset host 0's TCP connections on rail 1
    sleep 2; metrics_now >"$tmp/pre"
    $NB --prefix $P reset 0 1 >"$tmp/fault" 2>&1
    after_reset "$tmp/r0"
  elif [ -n "$fault" ]; then
    sleep 1; $NB --prefix $P "$fault" 0 $nic >/dev/null
    sleep 2; $NB --prefix $P restore 0 $nic >/dev/null
  fi
  wait $p0; local rc0=$?
  wait $p1; local rc1=$?
  if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/r0" &&
     every_iteration_checked "$tmp/r0" "$iters"; then
    return 0
  fi
  echo "     rank exits $rc0 $rc1; $(grep "Outputs checked" "$tmp/r0" || echo "no checked count")" >>"$tmp/r0"
  return 1
}

if ! want striping; then :
elif run striping ""; then
  if ! grep -q "4 rails" "$tmp/r0"; then bad "4-rail striping (not on 4 rails)"
  elif [ $OFI = 1 ] && ! grep -q "transport: libfabric" "$tmp/r0"; then bad "4-rail striping (not over libfabric)"
  elif grep "closed connection" "$tmp/r0" | grep -q "eth[0-3] 0.0 MB"; then
    bad "4-rail striping (a rail carried nothing)"
  elif [ "${BRAID_SOCKET_THREADS:-0}" -gt 0 ] &&
       ! grep -q "socket helper threads per connection: $BRAID_SOCKET_THREADS" "$tmp/r0"; then
    bad "4-rail striping (BRAID_SOCKET_THREADS=$BRAID_SOCKET_THREADS not in effect)"
  else ok "4-rail striping, every iteration verified"; fi
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

# A rail whose TCP connections are reset mid-run (netbed reset: host 0's segments on eth1 are
# answered with TCP resets for 0.3 s): no rail had failed just before, the reset must have hit,
# every iteration is verified, and the rail's counters (the sender's BRAID_METRICS_FILE) show
# the failover on every connection and on no other rail.  Over sockets each connection's stream 1 reconnects, exactly once, the
# receiver takes it back, and rail 1 then carries data again (its byte counter grows after the
# reconnect); the same over ofi.
reset_case() {
  local why="" peer v mid n want
  want=$(grep -c "NET/braid : connected to" "$tmp/r0")
  local before
  before=$(for r in 0 1 2 3; do rail_metric braid_rail_failovers_total $r "$tmp/pre" | awk -v r=$r '$2 > 0 { print "rail " r " to " $1 }'; done)
  if [ "$(rail_metric braid_rail_failovers_total 0 "$tmp/pre" | wc -l)" -ne "$want" ]; then
    why="no metrics of all $want connections just before the reset"
  elif [ -n "$before" ]; then why="already failed before the reset (at set-up?): $(echo $before)"
  elif ! grep -q "^reset: [1-9]" "$tmp/fault"; then why="the reset hit nothing: $(cat "$tmp/fault")"
  elif [ "$mid_alive" != 1 ]; then why="the run ended before rail 1 was measured after the reset"
  fi
  # failovers: rail 1 on every connection, no other rail
  [ -z "$why" ] && [ "$(rail_metric braid_rail_failovers_total 1 | awk '$2 >= 1' | wc -l)" -ne "$want" ] &&
    why="rail 1's failover counted on $(rail_metric braid_rail_failovers_total 1 | awk '$2 >= 1' | wc -l) of $want connections"
  for r in 0 2 3; do
    [ -z "$why" ] && rail_metric braid_rail_failovers_total $r | awk '$2 > 0 { f = 1 } END { exit !f }' &&
      why="rail $r failed too"
  done
  if [ -z "$why" ]; then
    n=$(grep -c "send stream 1 (rail 1, eth1) to .* reconnected" "$tmp/r0")
    [ "$n" -ne "$want" ] && why="stream 1 reconnected $n times over $want connections"
    grep -q "send stream [02-9] .* reconnected" "$tmp/r0" && why="another stream reconnected"
    n=$(grep -c "receive stream 1 (rail 1, eth1) from .* rejoined" "$tmp/r1")
    [ -z "$why" ] && [ "$n" -ne "$want" ] && why="the receiver took stream 1 back $n times over $want connections"
    # the metrics say so: rail 1 rejoined once on every connection, at a time in this run
    [ -z "$why" ] && [ "$(rail_metric braid_rail_rejoins_total 1 | awk '$2 == 1' | wc -l)" -ne "$want" ] &&
      why="rail 1's rejoin counted once on $(rail_metric braid_rail_rejoins_total 1 | awk '$2 == 1' | wc -l) of $want connections"
    [ -z "$why" ] && rail_metric braid_rail_last_rejoin_timestamp_seconds 1 |
      awk -v t0="$run_start" -v t1="$(date +%s)" '$2 < t0 || $2 > t1 { f = 1 } END { exit !f }' &&
      why="rail 1's last rejoin time is outside the run ($run_start to now)"
    while [ -z "$why" ] && read -r peer v; do
      mid=$(rail_metric braid_rail_bytes_total 1 "$tmp/mid" | awk -v p="$peer" '$1 == p { print $2 }')
      # At least a probe's 16 KiB: a rail the scheduler demoted meanwhile (slow under load) is
      # offered only probes, and its bytes after the reconnect still prove it carries data.
      [ $((v - ${mid:-0})) -ge 16384 ] ||
        why="rail 1 to $peer carried $((v - ${mid:-0})) bytes after its reconnect (want >= 16 KiB)"
    done < <(rail_metric braid_rail_bytes_total 1)
  fi
  if [ -z "$why" ]; then
    ok "rail reset mid-run: every iteration verified, stream 1 reconnected and rejoined once per connection, rail 1's failover and rejoin counted and data through it after"
  else
    bad "rail reset mid-run ($why)"
    echo "     --- $(cat "$tmp/fault"); rail 1 counters at the end, then after the reset:"
    grep 'rail="1"' "$tmp"/metrics.* "$tmp/mid" 2>/dev/null | sed 's/^/     /' | head -n 20
  fi
}
if want reset; then
  rm -f "$tmp"/metrics.*; mid_alive=0
  run_start=$(date +%s)
  if BRAID_METRICS_FILE="$tmp/metrics.%p" BRAID_METRICS_INTERVAL_MS=100 ITERS=100 run reset reset; then
    reset_case
  else bad "rail reset mid-run"; fi
fi

# A NIC reset (the issue's case): rail 2 of 4 down with its connections destroyed, and back:
# every iteration verified, rail 2 taken down, each connection's stream on it reconnected, and
# rail 2 carried data again (at least 1 MiB more on host 0's eth2 after the restore).
if want nic; then
  if run nicreset nicreset; then
    after=$(( $($NB --prefix $P exec 0 cat /sys/class/net/eth2/statistics/tx_bytes) - $(cat "$tmp/tx_restored") ))
    want_n=$(grep -c "NET/braid : connected to" "$tmp/r0")
    n=$(grep -c "send stream [0-9]* (rail 2, eth2) to .* reconnected" "$tmp/r0")
    if ! grep -q "rail 2 (eth2).*-> down" "$tmp/r0"; then bad "NIC reset (rail 2 never reported down)"
    elif [ "$n" -lt "$want_n" ]; then bad "NIC reset (rail 2 reconnected on $n of $want_n connections)"
    elif [ "$after" -lt 1048576 ]; then bad "NIC reset (eth2 sent $after bytes after the restore)"
    else ok "NIC reset (link down, ss -K) on rail 2: every iteration verified, rail 2 back on $n connection(s), $((after / 1048576)) MiB on eth2 after"; fi
  else bad "NIC reset mid-run"; fi
fi

# A rail that is down when the connection is set up: the connection starts on the other three,
# and the rail joins once it is restored.
if want setup; then
  port=$((30000 + RANDOM % 20000))
  $NB --prefix $P cut 0 1 >/dev/null
  args=(sendrecv --oneway -b 8M -e 8M -w 1 --iters 80 --check-all --timeout 30 --nranks 2 --rendezvous 10.77.0.1:$port)
  $NB --prefix $P exec 1 "$PERF" "${args[@]}" --rank 1 >"$tmp/r1" 2>&1 & p1=$!
  $NB --prefix $P exec 0 "$PERF" "${args[@]}" --rank 0 >"$tmp/r0" 2>&1 & p0=$!
  sleep 4; $NB --prefix $P restore 0 1 >/dev/null
  wait $p0; rc0=$?; wait $p1; rc1=$?
  if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/r0" &&
     every_iteration_checked "$tmp/r0" 80 &&
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
  if [ -z "$why" ]; then ok "a rail at a tenth of the rate is demoted, no rail taken down, every iteration verified"
  else
    bad "slow rail demoted ($why)"
    echo "     --- rail events (sender), with their times:"
    grep "NET/braid : rail [0-9]" "$tmp/r0" | sed 's/.*NET\/braid : /     /' | head -n 40
  fi
fi

echo "netbed${NETBED_TRANSPORT:+ ($NETBED_TRANSPORT)}: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
