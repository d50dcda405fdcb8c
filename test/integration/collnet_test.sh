#!/usr/bin/env bash
# CollNet through braid-ps on loopback: braid-perf drives CollNet as NCCL does, braid-ps servers
# sum; every result is verified.  Each braid-perf rank is a "node": CollNetChain has one head per
# node, CollNetDirect several (each its own CollNet communicator over the same servers, all at
# once).  Covers dtypes and ops, hold-back on and off, a server killed mid-run (re-route, results
# still right), the wrong token, no server reachable, CollNet unconfigured, and CollNet
# allgather/reducescatter refused (braid's iallgather/ireducescatter are NULL), and an on-path
# attacker (a proxy that flips one bit of a server's RESULT): with frame authentication the head
# drops that server and re-routes, results right; without it the run sees a wrong sum.
#   test/integration/collnet_test.sh BUILD_DIR       (build or build/san)
#   COLLNET_ONLY="NAME..." runs only those cases (test/run.sh's collnet-tsan-servers: the ones
#   where the servers work concurrently; the rest exercise the client, checked by the other runs)
# Prints "collnet: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
PERF=$B/braid-perf
PS=${PS:-$B/braid-ps}   # PS=build/tsan/braid-ps runs the servers under ThreadSanitizer
STAT=build/braid-stat   # a reader of the metrics files (not in the sanitizer trees)
export NCCL_NET_PLUGIN=$(realpath "$B/libnccl-net-braid.so") BRAID_SOCKET_IFNAME=lo
export BRAID_PS_TOKEN=collnet-test-$$-$RANDOM
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
want() { [ -z "${COLLNET_ONLY:-}" ] || [[ " $COLLNET_ONLY " == *" $1 "* ]]; }
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f "$tmp/out" ] && tail -n 25 "$tmp/out" | sed 's/^/     /'; }

# start_server N: a braid-ps on 127.0.0.1 at a free port; sets port[N] and spid[N].
declare -A port spid
start_server() {
  local n=$1 p
  for _ in 1 2 3 4 5; do
    p=$((20000 + RANDOM % 30000))
    "$PS" --listen "127.0.0.1:$p" --threads 2 >"$tmp/ps$n.log" 2>&1 &
    local pid=$!
    for _ in $(seq 50); do
      if grep -qi "listening" "$tmp/ps$n.log" 2>/dev/null; then port[$n]=$p; spid[$n]=$pid; pids+=("$pid"); return 0; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$pid" 2>/dev/null
  done
  echo "could not start braid-ps:"; cat "$tmp/ps$n.log"; return 1
}
start_server 0 && start_server 1 && start_server 2 || { echo "collnet: 0 passed, 1 failed"; exit 1; }
export BRAID_PS_SERVERS=127.0.0.1:${port[0]},127.0.0.1:${port[1]},127.0.0.1:${port[2]}

check() { # NAME CMD...: passes when CMD exits 0 within 300 s
  local name=$1; shift
  want "$name" || return 0
  if timeout 300 "$@" >"$tmp/out" 2>&1; then ok "$name"; else bad "$name (exit $?)"; fi
}
C=(allreduce --algo collnet)
check collnet-float-sweep   "$PERF" "${C[@]}" -n 3 -b 4 -e 32M -f 8 --iters 3 -w 1
check collnet-int32-max     "$PERF" "${C[@]}" -n 4 -b 4 -e 9000004 -f 11 --iters 3 -w 1 -d int32 -o max
check collnet-uint64        "$PERF" "${C[@]}" -n 2 -b 8 -e 4M -f 16 --iters 3 -w 1 -d uint64
check collnet-float64-min   "$PERF" "${C[@]}" -n 3 -b 8 -e 2M -f 32 --iters 3 -w 1 -d float64 -o min
check collnet-no-hold       env BRAID_PS_HOLD=0 "$PERF" "${C[@]}" -n 3 -b 4 -e 16M -f 16 --iters 3 -w 1
check collnet-small-parts   env BRAID_PS_PARTITION_BYTES=4K "$PERF" "${C[@]}" -n 2 -b 4 -e 1M -f 16 --iters 3 -w 1

# CollNetDirect: several heads per node, each with its own collComm, chunks interleaved by head.
D=(allreduce --algo CollNetDirect)
check collnet-direct-3heads "$PERF" "${D[@]}" --heads 3 -n 3 -c 4 -b 4 -e 16M -f 8 --iters 2 -w 1 --check-all
check collnet-direct-int32-max "$PERF" "${D[@]}" --heads 2 -n 2 -c 9 -b 4 -e 9000004 -f 11 --iters 2 -w 1 --check-all -d int32 -o max

# CollNet allgather / reducescatter: braid's tables have NULL iallgather / ireducescatter (NCCL's
# tuning then never picks CollNet for them); braid-perf refuses with a message saying so.
for op in allgather reducescatter; do
  want "collnet-$op-refused" || continue
  if ! timeout 60 "$PERF" $op --algo collnet -n 2 -b 1K -e 1K --iters 1 -w 0 >"$tmp/out" 2>&1 &&
     grep -q "braid's CollNet (ncclCollNetPlugin_v12) offers allreduce only" "$tmp/out"; then
    ok "collnet-$op-refused"; else bad "collnet-$op-refused"; fi
done

# A server killed mid-run: every iteration verified (--check-all: each its own data and a
# poisoned output; 3 ranks x (1 warm-up + 60 + 1 verify pass) outputs checked), the run
# succeeds, the loss was logged, and every head's metrics file (BRAID_METRICS_FILE) shows the
# killed server lost once and the other two up, each having taken partitions.
server_metric() { # METRIC SERVER-PORT: "VALUE" per head
  sed -n "s/^$1{.*server=\"127.0.0.1:$2\"} \([0-9]*\)\$/\1/p" "$tmp"/metrics.*
}
if want collnet-server-killed; then
( sleep 3; kill -9 "${spid[1]}" ) &
killer=$!
rm -f "$tmp"/metrics.*
why=""
if ! BRAID_METRICS_FILE="$tmp/metrics.%p" BRAID_METRICS_INTERVAL_MS=100 \
     timeout 300 "$PERF" "${C[@]}" -n 3 -b 16M -e 16M --iters 60 -w 1 --check-all >"$tmp/out" 2>&1; then
  why="exit status"
elif ! grep -q "Outputs checked      : 186 (all ranks; every iteration)" "$tmp/out"; then why="not every iteration checked"
elif ! grep -q "lost" "$tmp/out"; then why="the loss was not logged"
elif [ "$(server_metric braid_ps_server_up "${port[1]}" | tr -d '\n')" != 000 ]; then
  why="server 1 up in the heads' metrics: $(server_metric braid_ps_server_up "${port[1]}" | tr '\n' ' ')"
elif [ "$(server_metric braid_ps_server_failures_total "${port[1]}" | tr -d '\n')" != 111 ]; then
  why="server 1's failures per head: $(server_metric braid_ps_server_failures_total "${port[1]}" | tr '\n' ' ')"
else
  for n in 0 2; do
    [ "$(server_metric braid_ps_server_up "${port[$n]}" | tr -d '\n')" = 111 ] || why="server $n not up on every head"
    server_metric braid_ps_server_partitions_total "${port[$n]}" | awk '$1 == 0 { f = 1 } END { exit !f }' &&
      why="server $n took no partition from a head"
  done
fi
if [ -z "$why" ]; then ok "collnet-server-killed"; else bad "collnet-server-killed ($why)"; ls "$tmp"; fi
wait "$killer"
fi

# A server killed and started again on its address, three times in one run (the first time with
# something answering garbage on its port for a second before), the other three of four serving
# throughout: every iteration verified (4 ranks x (1 + 150 + 1) outputs, each its own
# data), and every head re-admitted the server each time: its metrics say up, lost 3 times,
# rejoined 3 times, and the last instance summed partitions of this communicator (its session
# log).  Each head re-admits it at the same op (rank 0 decides): a head that used it at another
# op than the others would hang the run (the timeout) or fail its check.
restart_server() { # N: a new braid-ps on port[N] (the old one killed), appending to its log
  local n=$1
  "$PS" --listen "127.0.0.1:${port[$n]}" --threads 2 >>"$tmp/ps$n.log" 2>&1 &
  spid[$n]=$!; pids+=("$!")
}
if want collnet-server-restarted && start_server 4 && start_server 5 && start_server 6 && start_server 7; then
  rm -f "$tmp"/metrics.*
  # The first time, for 1 s before the real server is back, something else on its port answers
  # every connection with garbage: that costs only those rejoin attempts.
  cat >"$tmp/garbage.py" <<'PY'
import socket, sys, time
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1]))); ls.listen(64); ls.settimeout(0.05)
end = time.time() + 1.0
while time.time() < end:
    try:
        c, _ = ls.accept()
    except OSError:
        continue
    try:
        c.sendall(b"this is not a braid-ps frame, and it is longer than a header is....")
    except OSError:
        pass
    c.close()
PY
  ( for k in 1 2 3; do
      sleep 2; kill -9 "${spid[7]}"; sleep 0.5
      [ "$k" = 1 ] && python3 "$tmp/garbage.py" "${port[7]}" 2>/dev/null
      : >"$tmp/ps7.log"; restart_server 7
      echo "${spid[7]}" >"$tmp/last7"
    done; echo done >>"$tmp/last7" ) &
  killer=$!
  why=""
  if ! BRAID_PS_SERVERS=127.0.0.1:${port[4]},127.0.0.1:${port[5]},127.0.0.1:${port[6]},127.0.0.1:${port[7]} \
       BRAID_METRICS_FILE="$tmp/metrics.%p" BRAID_METRICS_INTERVAL_MS=100 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET \
       timeout 300 "$PERF" "${C[@]}" -n 4 -b 8M -e 8M --iters 150 -w 1 --check-all >"$tmp/out" 2>&1; then
    why="exit status"
  elif ! grep -q "Outputs checked      : 608 (all ranks; every iteration)" "$tmp/out"; then why="not every iteration checked"
  elif ! grep -q done "$tmp/last7"; then why="the run ended before the third restart"
  elif ! grep -q "not back yet (session generation [0-9]*: bad frame from the server" "$tmp/out"; then
    why="no rejoin attempt met the garbage (the heads' INFO lines)"
  elif [ "$(server_metric braid_ps_server_failures_total "${port[7]}" | tr -d '\n')" != 3333 ]; then
    why="server 7 lost per head: $(server_metric braid_ps_server_failures_total "${port[7]}" | tr '\n' ' ') (want 3 each)"
  elif [ "$(server_metric braid_ps_server_rejoins_total "${port[7]}" | tr -d '\n')" != 3333 ]; then
    why="server 7 re-admitted per head: $(server_metric braid_ps_server_rejoins_total "${port[7]}" | tr '\n' ' ') (want 3 each)"
  elif [ "$(server_metric braid_ps_server_up "${port[7]}" | tr -d '\n')" != 1111 ]; then
    why="server 7 not up on every head at the end"
  elif [ "$("$STAT" "$tmp"/metrics.* | awk -v s="127.0.0.1:${port[7]}" \
          '$4 == s && $5 == "up" && $6 == 3 && $9 == 3 && $11 == "ago"' | wc -l)" != 4 ]; then
    why="braid-stat does not show server 7 up, lost 3 times and rejoined 3 times on every head: $("$STAT" "$tmp"/metrics.* | grep -F ":${port[7]}" | tr '\n' ' ')"
  elif [ "$(grep -c "braid-ps server 127.0.0.1:${port[7]} re-admitted from op" "$tmp/out")" != 12 ]; then
    why="$(grep -c "re-admitted from op" "$tmp/out") re-admission lines (want 4 heads x 3)"
  elif [ "$(grep -o "re-admitted from op [0-9]*" "$tmp/out" | sort | uniq -c | awk '{print $1}' | sort -u | tr -d '\n')" != 4 ]; then
    why="the heads re-admitted it at different ops: $(grep -o "re-admitted from op [0-9]*" "$tmp/out" | sort | uniq -c | tr '\n' ' ')"
  else
    sleep 0.5
    n=$(sed -n 's/.*session .* closed: 4 ranks (4 joined), [0-9]* ops, \([0-9]*\) partitions.*/\1/p' "$tmp/ps7.log" | tail -n 1)
    [ "${n:-0}" -gt 0 ] || why="the last instance of server 7 summed no partition: $(tail -n 3 "$tmp/ps7.log" | tr '\n' ' ')"
  fi
  if [ -z "$why" ]; then ok "collnet-server-restarted (3 kills and restarts; re-admitted at ops $(grep -o "re-admitted from op [0-9]*" "$tmp/out" | awk '{print $4}' | sort -un | tr '\n' ' '))"
  else bad "collnet-server-restarted ($why)"; grep -E "re-admitted|lost|back|used again" "$tmp/out" | head -n 30 | sed 's/^/     /'
    [ -n "${COLLNET_KEEP:-}" ] && cp "$tmp/out" "$COLLNET_KEEP"; fi
  wait "$killer" 2>/dev/null
  for n in 4 5 6; do kill "${spid[$n]}" 2>/dev/null; done
  kill "$(head -n 1 "$tmp/last7")" 2>/dev/null # the last instance (started by the killer)
fi

# On the path between the heads and one server: a proxy that flips one bit of what the server
# sends (FLIP_AT bytes into the first connection that gets that far: a RESULT's payload).
cat >"$tmp/tamper.py" <<'PY'
import socket, sys, threading
port_file, target, flip_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(64)
open(port_file + ".tmp", "w").write(str(ls.getsockname()[1]))
import os; os.rename(port_file + ".tmp", port_file)
once = threading.Lock()
flipped = [False]
def pipe(src, dst, tamper):
    n = 0
    try:
        while True:
            b = src.recv(1 << 16)
            if not b:
                break
            if tamper and n + len(b) > flip_at:
                with once:
                    if not flipped[0] and n <= flip_at:
                        b = bytearray(b)
                        b[flip_at - n] ^= 0x10
                        b = bytes(b)
                        flipped[0] = True
                        print("flipped a bit", flush=True)
            n += len(b)
            dst.sendall(b)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c, _ = ls.accept()
    u = socket.create_connection(("127.0.0.1", target))
    for s in (c, u):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pipe, args=(c, u, False), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c, True), daemon=True).start()
PY
tamper() { # NAME EXPECTED_EXIT GREP [ENV...]: a 2-node run through the proxy to server 0, then server 2
  local name=$1 want=$2 pat=$3; shift 3
  want "$name" || return 0
  rm -f "$tmp/tport"
  python3 "$tmp/tamper.py" "$tmp/tport" "${port[0]}" 3000000 >"$tmp/tamper.log" 2>&1 &
  local tp=$!
  pids+=("$tp")
  for _ in $(seq 50); do [ -s "$tmp/tport" ] && break; sleep 0.1; done
  local rc=0
  env "$@" BRAID_PS_SERVERS="127.0.0.1:$(cat "$tmp/tport"),127.0.0.1:${port[2]}" timeout 120 \
    "$PERF" "${C[@]}" -n 2 -b 8M -e 8M --iters 12 -w 1 --check-all >"$tmp/out" 2>&1 || rc=$?
  kill "$tp" 2>/dev/null; wait "$tp" 2>/dev/null
  if [ "$rc" -eq "$want" ] && grep -q "flipped" "$tmp/tamper.log" && grep -q "$pat" "$tmp/out"; then
    ok "$name"; else bad "$name (exit $rc, wanted $want)"; fi
}
if command -v python3 >/dev/null; then
  tamper collnet-tampered-result-rerouted 0 "failed its authentication tag"
  tamper collnet-tampered-result-without-frame-auth 1 "." BRAID_PS_FRAME_AUTH=0
else
  echo "skip collnet-tampered-result-rerouted (python3 not found)"
  echo "skip collnet-tampered-result-without-frame-auth (python3 not found)"
fi

# The wrong token: connect fails on every head with a message naming the token, no hang.
if ! want collnet-wrong-token; then :
elif ! BRAID_PS_TOKEN=wrong BRAID_PS_CONNECT_TIMEOUT_MS=5000 timeout 60 "$PERF" "${C[@]}" -n 2 -b 1K -e 1K --iters 1 -w 0 \
     >"$tmp/out" 2>&1 && grep -q "token" "$tmp/out"; then ok "collnet-wrong-token"; else bad "collnet-wrong-token"; fi
# No server reachable: a clear error within the connect timeout.
if ! want collnet-no-server; then :
elif ! BRAID_PS_SERVERS=127.0.0.1:1 BRAID_PS_CONNECT_TIMEOUT_MS=1500 timeout 60 "$PERF" "${C[@]}" -n 2 -b 1K -e 1K --iters 1 -w 0 \
     >"$tmp/out" 2>&1 && grep -q "no braid-ps server usable" "$tmp/out"; then ok "collnet-no-server"; else bad "collnet-no-server"; fi
# CollNet not configured: braid-perf says CollNet is unavailable and why.
if ! want collnet-unconfigured; then :
elif ! env -u BRAID_PS_SERVERS NCCL_COLLNET_ENABLE=1 timeout 60 "$PERF" "${C[@]}" -n 2 -b 1K -e 1K --iters 1 -w 0 \
     >"$tmp/out" 2>&1 && grep -q "BRAID_PS_SERVERS" "$tmp/out"; then ok "collnet-unconfigured"; else bad "collnet-unconfigured"; fi

# 2000 connections that send a line of garbage longer than a frame header and go: braid-ps refuses
# each (a malformed frame), in one log line a second (it wrote one line each), and still serves a
# job right after.
if want collnet-strangers-summarised && start_server 3; then  # a server of its own (1 was killed above)
  before=$(wc -l <"$tmp/ps3.log")
  t0=$SECONDS
  for i in $(seq 2000); do
    { exec 3<>/dev/tcp/127.0.0.1/"${port[3]}" &&
      printf 'GET / HTTP/1.1 this is not a braid-ps frame header, and it is longer than one %d\n' "$i" >&3 &&
      exec 3>&-; } 2>/dev/null
  done
  sleep 1.5
  lines=$(( $(wc -l <"$tmp/ps3.log") - before ))
  took=$((SECONDS - t0))
  if [ "$lines" -ge 1 ] && [ "$lines" -le $((took + 4)) ] &&
     BRAID_PS_SERVERS=127.0.0.1:${port[3]} timeout 120 "$PERF" "${C[@]}" -n 2 -b 1K -e 1M -f 32 --iters 2 -w 1 \
       >"$tmp/out" 2>&1; then
    ok "collnet-strangers-summarised ($lines lines in $took s for 2000 connections)"
  else
    bad "collnet-strangers-summarised ($lines log lines in $took s for 2000 connections)"
    tail -n 5 "$tmp/ps3.log" | sed 's/^/     /'
  fi
fi

# The servers' own logs: no sanitizer report, whatever the clients saw.
if grep -l -E "ThreadSanitizer|AddressSanitizer|LeakSanitizer|runtime error" "$tmp"/ps*.log >/dev/null 2>&1; then
  bad "servers-sanitizer-clean"; grep -h -A12 -E "ThreadSanitizer|AddressSanitizer|runtime error" "$tmp"/ps*.log | head -40
else ok "servers-sanitizer-clean"; fi

echo "collnet: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
