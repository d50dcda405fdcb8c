# shellcheck shell=bash
# Sourced by bench/collnet.sh and bench/ps_slow.sh: the CollNet netbed (root).  8 hosts with one
# NIC each, every NIC shaped to RATE: hosts 0-3 are GPU nodes (one braid-perf head each), hosts
# 4-7 run braid-ps.  The caller sets RATE and CHANNELS first; this brings the netbed up (down
# again on exit, with every server started here) and defines:
#   addr HOST              the host's address
#   servers PORT HOST...   one braid-ps per host at PORT; sets BRAID_PS_SERVERS
#   run ARGS...            braid-perf on hosts 0-3 (allreduce of 64 MiB unless ARGS say otherwise);
#                          prints "time_us busbw_GBps" of rank 0's last row
# and NB, P (netbed.sh and its prefix, for shape/restore/exec), tmp (a scratch folder: each
# server's log is $tmp/ps-HOST-PORT.log, each rank's output $tmp/rRANK), spids (server pids).
NB=test/netbed/netbed.sh
P=bc$$
[ "$(id -u)" = 0 ] || { echo "$(basename "$0"): needs root (network namespaces)"; exit 1; }
mkdir -p bench/results
tmp=$(mktemp -d)
spids=()
cleanup() { kill "${spids[@]}" 2>/dev/null; $NB --prefix $P down >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
$NB --prefix $P up --hosts 8 --rails 1 --rate "$RATE" >/dev/null
PERF=$(realpath build/braid-perf)
PS=$(realpath build/braid-ps)
export NCCL_NET_PLUGIN=$(realpath build/libnccl-net-braid.so) BRAID_SOCKET_IFNAME=eth
export BRAID_PS_TOKEN=bench-$$-$RANDOM
addr() { echo "10.77.0.$(($1 + 1))"; }

servers() {
  local port=$1; shift
  local list=""
  for h in "$@"; do
    $NB --prefix $P exec "$h" "$PS" --listen "$(addr "$h"):$port" --threads 2 >"$tmp/ps-$h-$port.log" 2>&1 &
    spids+=($!)
    list+="${list:+,}$(addr "$h"):$port"
  done
  sleep 0.5
  export BRAID_PS_SERVERS=$list
}
run() {
  local port=$((30000 + RANDOM % 20000)) pids=()
  local args=(allreduce -b 64M -e 64M --channels "$CHANNELS" --nranks 4 --rendezvous "$(addr 0):$port" "$@")
  for r in 3 2 1; do
    $NB --prefix $P exec "$r" "$PERF" "${args[@]}" --rank "$r" >"$tmp/r$r" 2>&1 &
    pids+=($!)
  done
  if ! $NB --prefix $P exec 0 "$PERF" "${args[@]}" --rank 0 >"$tmp/r0" 2>&1; then
    cat "$tmp/r0" >&2; wait "${pids[@]}" || true; return 1
  fi
  wait "${pids[@]}"
  awk '/^ +[0-9]/ {t = $5; b = $7} END {printf "%s %s\n", t, b}' "$tmp/r0"
}
