#!/usr/bin/env bash
# Two builds of braid side by side, interleaved figure by figure (A then B, B then A in the next
# round: these machines are shared and noisy), for a change that must not cost performance:
#   - loopback: braid-perf sendrecv 64 MiB one way and both ways, 128 KiB and 512 KiB pieces
#     (NCCL_P2P_NET_CHUNKSIZE), and the 8-byte sendrecv time;
#   - as root, the netbed: 2 hosts x 4 rails at 500mbit, sendrecv --oneway 64 MiB; and 8 hosts x 1
#     NIC at 400mbit, allreduce 64 MiB, ring over the net plugin and CollNet on 4 braid-ps servers.
# Usage: bench/ab.sh A_BUILD B_BUILD [ROUNDS]   (default 3; e.g. a clone of the previous commit
# built into /tmp/old/build, and build).  Writes bench/results/ab-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/stats.sh
[ $# -ge 2 ] || { sed -n '2,9p' "$0"; exit 2; }
A=$(realpath "$1") B=$(realpath "$2") rounds=${3:-3}
for d in "$A" "$B"; do
  for f in braid-perf braid-ps libnccl-net-braid.so; do
    [ -e "$d/$f" ] || { echo "ab: $d/$f missing (build both trees first)"; exit 2; }
  done
done
mkdir -p bench/results
out=bench/results/ab-$(date +%Y%m%d-%H%M%S).txt
tmp=$(mktemp -d)
NB=test/netbed/netbed.sh
root=0; [ "$(id -u)" = 0 ] && root=1
spids=()
cleanup() {
  [ ${#spids[@]} -gt 0 ] && kill "${spids[@]}" 2>/dev/null
  if [ $root = 1 ]; then $NB --prefix abm$$ down >/dev/null 2>&1; $NB --prefix abc$$ down >/dev/null 2>&1; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# lo BUILD ARGS...: a 2-rank braid-perf run on loopback; prints "time_us algbw" of the last row.
lo() {
  local d=$1; shift
  NCCL_NET_PLUGIN=$d/libnccl-net-braid.so BRAID_SOCKET_IFNAME=lo "$d/braid-perf" "$@" 2>&1 |
    awk '/^ +[0-9]/ {t=$5; a=$6} END {print t, a}'
}

if [ $root = 1 ]; then
  $NB --prefix abm$$ up --hosts 2 --rails 4 --rate 500mbit >/dev/null
  $NB --prefix abc$$ up --hosts 8 --rails 1 --rate 400mbit >/dev/null
  token=ab-$$-$RANDOM
  # Four braid-ps servers of each build on hosts 4-7 of the CollNet bed.
  for h in 4 5 6 7; do
    for which in A B; do
      d=${!which}; port=7000; [ $which = B ] && port=7001
      BRAID_PS_TOKEN=$token $NB --prefix abc$$ exec "$h" "$d/braid-ps" --listen "10.77.0.$((h + 1)):$port" \
        --threads 2 >"$tmp/ps-$which-$h.log" 2>&1 &
      spids+=($!)
    done
  done
  sleep 0.5
fi
# multirail BUILD: Gbit/s of sendrecv --oneway 64 MiB over the 4 shaped rails.
multirail() {
  local d=$1 port=$((30000 + RANDOM % 20000))
  local args=(sendrecv --oneway -b 64M -e 64M --nranks 2 --rendezvous 10.77.0.1:$port -w 1 --iters 3)
  local env=(env NCCL_NET_PLUGIN=$d/libnccl-net-braid.so BRAID_SOCKET_IFNAME=eth)
  $NB --prefix abm$$ exec 1 "${env[@]}" "$d/braid-perf" "${args[@]}" --rank 1 >"$tmp/m1" 2>&1 &
  local p=$!
  $NB --prefix abm$$ exec 0 "${env[@]}" "$d/braid-perf" "${args[@]}" --rank 0 >"$tmp/m0" 2>&1 || { cat "$tmp/m0" >&2; }
  wait $p || true
  awk '/^ +[0-9]/ {a=$6} END {printf "%.3f\n", a * 8}' "$tmp/m0"
}
# coll BUILD ALGO: busbw (GB/s) of allreduce 64 MiB on hosts 0-3, 8 channels.
coll() {
  local d=$1 algo=$2 port=$((30000 + RANDOM % 20000)) pids=() sport=7000
  [ "$d" = "$B" ] && sport=7001
  local list=10.77.0.5:$sport,10.77.0.6:$sport,10.77.0.7:$sport,10.77.0.8:$sport
  local env=(env NCCL_NET_PLUGIN=$d/libnccl-net-braid.so BRAID_SOCKET_IFNAME=eth BRAID_PS_TOKEN=$token BRAID_PS_SERVERS=$list)
  local args=(allreduce -b 64M -e 64M --channels 8 --nranks 4 --rendezvous 10.77.0.1:$port --algo "$algo" -w 1 --iters 3)
  for r in 3 2 1; do
    $NB --prefix abc$$ exec "$r" "${env[@]}" "$d/braid-perf" "${args[@]}" --rank "$r" >"$tmp/c$r" 2>&1 &
    pids+=($!)
  done
  $NB --prefix abc$$ exec 0 "${env[@]}" "$d/braid-perf" "${args[@]}" --rank 0 >"$tmp/c0" 2>&1 || cat "$tmp/c0" >&2
  wait "${pids[@]}" || true
  awk '/^ +[0-9]/ {b=$7} END {print b}' "$tmp/c0"
}

# one NAME BUILD: one measurement of figure NAME with BUILD, recorded as NAME_A or NAME_B.
one() {
  local name=$1 which=$2 d t a
  d=${!which}
  case $name in
    oneway128) read -r _ a < <(lo "$d" sendrecv --oneway -n 2 -b 64M -e 64M -w 3 --iters 20) ;;
    oneway512) read -r _ a < <(NCCL_P2P_NET_CHUNKSIZE=524288 lo "$d" sendrecv --oneway -n 2 -b 64M -e 64M -w 3 --iters 20) ;;
    bidir128) read -r _ a < <(lo "$d" sendrecv -n 2 -b 64M -e 64M -w 3 --iters 20) ;;
    bidir512) read -r _ a < <(NCCL_P2P_NET_CHUNKSIZE=524288 lo "$d" sendrecv -n 2 -b 64M -e 64M -w 3 --iters 20) ;;
    lat8) read -r t _ < <(lo "$d" sendrecv -n 2 -b 8 -e 8 -w 2000 --iters 50000); a=$t ;;
    multirail) a=$(multirail "$d") ;;
    ring) a=$(coll "$d" ring) ;;
    collnet) a=$(coll "$d" collnet) ;;
  esac
  add "${name}_$which" "$a"
}

figures=(oneway128 oneway512 bidir128 bidir512 lat8)
[ $root = 1 ] && figures+=(multirail ring collnet)
for r in $(seq 1 "$rounds"); do
  echo "# round $r/$rounds" >&2
  for f in "${figures[@]}"; do
    if [ $((r % 2)) = 1 ]; then one "$f" A; one "$f" B; else one "$f" B; one "$f" A; fi
  done
done

label() {
  case $1 in
    oneway128) echo "loopback sendrecv --oneway 64M, 128K pieces (GB/s)" ;;
    oneway512) echo "loopback sendrecv --oneway 64M, 512K pieces (GB/s)" ;;
    bidir128) echo "loopback sendrecv both ways 64M, 128K, per dir (GB/s)" ;;
    bidir512) echo "loopback sendrecv both ways 64M, 512K, per dir (GB/s)" ;;
    lat8) echo "loopback sendrecv 8 B time (us, lower is better)" ;;
    multirail) echo "netbed 4 x 500mbit, sendrecv --oneway 64M (Gbit/s)" ;;
    ring) echo "netbed 4 nodes at 400mbit, ring allreduce 64M busbw (GB/s)" ;;
    collnet) echo "netbed, CollNet on 4 braid-ps servers, busbw (GB/s)" ;;
  esac
}
{
  echo "# braid A/B, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores; medians of $rounds interleaved rounds"
  echo "# A = $A"
  echo "# B = $B"
  printf '%-58s %9s %9s %6s   %s\n' figure A B B/A "raw A | raw B"
  for f in "${figures[@]}"; do
    printf '%-58s %9s %9s %6s   [%s| %s]\n' "$(label "$f")" "$(m "${f}_A")" "$(m "${f}_B")" \
      "$(ratio "$(m "${f}_B")" "$(m "${f}_A")")" "${vals[${f}_A]}" "${vals[${f}_B]}"
  done
} | tee "$out"
echo "# written to $out"
