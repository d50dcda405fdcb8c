#!/usr/bin/env bash
# What losing a braid-ps server costs, and what its re-admission gives back, on loopback: four
# braid-ps servers, braid-perf allreduce --algo collnet with 4 ranks (one head each), SIZE per
# op, each run ITERS iterations (about 25 s here).  Interleaved rounds of:
#   healthy: nothing happens;
#   restart: KILL_AT s after the heads connected, server 3 is killed (kill -9), and started again
#            on its address RESTART_AFTER s later.
# Every run is verified (--check-all).  Rank 0's metrics file (BRAID_METRICS_FILE, every 100 ms)
# is sampled every 0.25 s, from which:
#   re-admitted after: from the restart until rank 0's metrics show server 3 up again, and that
#     time in operations at the run's operation rate; the heads' log gives the operations from
#     the server standing by (every head joined its new session) to the re-admission;
#   after/healthy: rank 0's summed result bytes per second over the window 6 s to 1 s before its
#     last sample, against the healthy run's over its own such window (goal >= 0.95): the
#     CollNet throughput once the server is back, against a run that never lost it.
# Usage: [ROUNDS=2] [SIZE=8M] [ITERS=300] [KILL_AT=4] [RESTART_AFTER=1] bench/ps_rejoin.sh
# Writes bench/results/ps-rejoin-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
SIZE=${SIZE:-8M}
ITERS=${ITERS:-300}
KILL_AT=${KILL_AT:-4}
RESTART_AFTER=${RESTART_AFTER:-1}
make -s build/braid-perf build/braid-ps build/libnccl-net-braid.so
mkdir -p bench/results
out=bench/results/ps-rejoin-$(date +%Y%m%d-%H%M%S).txt
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export NCCL_NET_PLUGIN=$(realpath build/libnccl-net-braid.so) BRAID_SOCKET_IFNAME=lo
export BRAID_PS_TOKEN=ps-rejoin-bench-$$-$RANDOM
now() { date +%s.%N; }

declare -a port spid
start_server() { # N [PORT]: a braid-ps on 127.0.0.1 (a free port, or PORT)
  local n=$1 p=${2:-}
  for _ in 1 2 3 4 5; do
    [ -n "${2:-}" ] || p=$((20000 + RANDOM % 30000))
    build/braid-ps --listen "127.0.0.1:$p" --threads 2 >"$tmp/ps$n.log" 2>&1 &
    local pid=$!
    disown "$pid" # killed on purpose: no job notice
    for _ in $(seq 50); do
      if grep -qi "listening" "$tmp/ps$n.log"; then port[$n]=$p; spid[$n]=$pid; pids+=("$pid"); return 0; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  done
  echo "could not start braid-ps $n"; cat "$tmp/ps$n.log"; exit 1
}
for n in 0 1 2 3; do start_server $n; done
export BRAID_PS_SERVERS=127.0.0.1:${port[0]},127.0.0.1:${port[1]},127.0.0.1:${port[2]},127.0.0.1:${port[3]}

# rank0_sample FILE: "time result_bytes(all servers) server3_up" from rank 0's metrics every 0.25 s
rank0_sample() {
  while :; do
    local f
    # (the metrics files are written to a temporary name and renamed: not those)
    f=$(grep -l 'rank="0"' "$tmp"/m.* 2>/dev/null | grep -v '\.tmp\.' | head -n 1 || true)
    if [ -n "$f" ]; then
      awk -v t="$(now)" -v s3="server=\"127.0.0.1:${port[3]}\"" '
        /^braid_ps_server_result_bytes_total/ { b += $NF }
        /^braid_ps_server_up/ && index($0, s3) { up = $NF }
        END { print t, b + 0, up + 0 }' "$f" 2>/dev/null || true
    fi
    sleep 0.25
  done >"$1"
}

# run NAME RESTART(0|1)
run() {
  local name=$1 restart=$2
  rm -f "$tmp"/m.*
  rank0_sample "$tmp/$name.samples" & local sp=$!
  BRAID_METRICS_FILE="$tmp/m.%p" BRAID_METRICS_INTERVAL_MS=100 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET \
    timeout 600 build/braid-perf allreduce --algo collnet -n 4 -b "$SIZE" -e "$SIZE" --iters "$ITERS" -w 1 \
    --check-all >"$tmp/$name.out" 2>&1 & local pp=$!
  for _ in $(seq 600); do grep -q "(elements)" "$tmp/$name.out" && break; sleep 0.1; done
  if [ "$restart" = 1 ]; then
    sleep "$KILL_AT"; kill -9 "${spid[3]}"; sleep "$RESTART_AFTER"
    start_server 3 "${port[3]}"; now >"$tmp/$name.up"
  fi
  local rc=0
  wait $pp || rc=$?
  kill $sp 2>/dev/null || true; wait $sp 2>/dev/null || true
  if [ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/$name.out"; then echo "$name: verified"
  else echo "$name: FAILED (exit $rc)"; tail -n 5 "$tmp/$name.out"; return 1; fi
}

# rate FILE: bytes/s over [last - 6 s, last - 1 s]
rate() {
  awk '{ t[NR] = $1; b[NR] = $2 } END {
    last = t[NR]; for (i = 1; i <= NR; i++) { if (!a && t[i] >= last - 6) a = i; if (t[i] <= last - 1) z = i }
    if (!a || z <= a) { print 0; exit } printf "%.0f\n", (b[z] - b[a]) / (t[z] - t[a]) }' "$1"
}

{
  echo "# bench/ps_rejoin.sh $(date -u +%FT%TZ) $(uname -n): 4 braid-ps servers, 4 ranks on loopback,"
  echo "# allreduce $SIZE x $ITERS, server 3 killed ${KILL_AT} s in and restarted ${RESTART_AFTER} s later"
  for r in $(seq "$ROUNDS"); do
    run healthy$r 0
    run restart$r 1
    h=$(rate "$tmp/healthy$r.samples"); a=$(rate "$tmp/restart$r.samples")
    up=$(cat "$tmp/restart$r.up")
    back=$(awk -v u="$up" '$1 > u && $3 == 1 { printf "%.2f\n", $1 - u; exit }' "$tmp/restart$r.samples")
    read -r ops secs < <(sed -n 's/.*CollNet rank 0\/4 closed after \([0-9.]*\) s: \([0-9]*\) allreduce ops.*/\2 \1/p' "$tmp/restart$r.out")
    standby=$(sed -n 's/.*CollNet rank 0\/4: braid-ps server .* re-admitted from op \([0-9]*\) .*stood by from op [0-9]*, \([0-9]*\) ops.*/\2 (op \1)/p' "$tmp/restart$r.out" | head -n 1)
    echo "round $r: healthy $(awk -v h="$h" 'BEGIN { printf "%.1f", h / 1e6 }') MB/s of results at rank 0;" \
         "after the re-admission $(awk -v a="$a" 'BEGIN { printf "%.1f", a / 1e6 }') MB/s:" \
         "after/healthy $(awk -v a="$a" -v h="$h" 'BEGIN { printf "%.2f", (h > 0 ? a / h : 0) }')"
    echo "round $r: re-admitted ${back:-never} s after the restart" \
         "(~$(awk -v o="${ops:-0}" -v s="${secs:-1}" -v b="${back:-0}" 'BEGIN { printf "%.0f", o / s * b }') ops at" \
         "$(awk -v o="${ops:-0}" -v s="${secs:-1}" 'BEGIN { printf "%.0f", o / s }') ops/s);" \
         "from standing by to the re-admission: ${standby:-none} ops"
  done
  kill "${pids[@]}" 2>/dev/null || true # (this block is a subshell: the restarted servers are its own)
} | tee "$out"
echo "wrote $out"
