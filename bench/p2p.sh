#!/usr/bin/env bash
# Point-to-point figures of the TCP transport on loopback, side by side with plain-TCP references
# in the same run, interleaved round by round (these machines are shared and noisy):
#   - tcp_stream: a plain two-process TCP program, 1 MiB blocking writes, a thread per direction
#   - tcp_pingpong: a plain TCP ping-pong whose receivers spin on non-blocking recv(), and its
#     --exchange mode: sendrecv's shape over two one-way connections (NCCL's comm structure)
#   - tcp_onethread: both directions driven by one non-blocking thread per process, the way
#     NCCL's single proxy thread drives a rank's send and receive connections
#   - braid-perf through libnccl-net-braid.so, NCCL-shaped (8 in flight, 128 KiB / 512 KiB pieces)
#   - optionally another plugin through braid-perf (OTHER_PLUGIN=/path/libnccl-net-x.so, with
#     whatever environment it needs, e.g. aws-ofi-nccl with FI_PROVIDER=tcp)
# Usage: bench/p2p.sh [ROUNDS]   (default 5).  Writes bench/results/p2p-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/stats.sh
rounds=${1:-5}
B=build
PERF=$B/braid-perf
export NCCL_NET_PLUGIN=$PWD/$B/libnccl-net-braid.so BRAID_SOCKET_IFNAME=lo
mkdir -p bench/results
out=bench/results/p2p-$(date +%Y%m%d-%H%M%S).txt

# perf_col OP_ARGS... : prints "time_us algbw" of the last table row.
perf_row() {
  "$PERF" "$@" 2>&1 | awk '/^ +[0-9]/ {t=$5; a=$6} END {print t, a}'
}

for r in $(seq 1 "$rounds"); do
  echo "# round $r/$rounds" >&2
  add plain_oneway "$($B/tcp_stream --repeat 1 --seconds 1 | sed -n 's/.* gbps_median=\([0-9.]*\).*/\1/p')"
  read -r _ a < <(perf_row sendrecv --oneway -n 2 -b 64M -e 64M -w 3 --iters 20)
  add braid_oneway_128k "$a"
  read -r _ a < <(NCCL_P2P_NET_CHUNKSIZE=524288 perf_row sendrecv --oneway -n 2 -b 64M -e 64M -w 3 --iters 20)
  add braid_oneway_512k "$a"
  if [ -n "${OTHER_PLUGIN:-}" ]; then
    read -r _ a < <(NCCL_NET_PLUGIN=$OTHER_PLUGIN perf_row sendrecv --oneway -n 2 -b 64M -e 64M -w 3 --iters 20)
    add other_oneway_128k "$a"
    read -r _ a < <(NCCL_NET_PLUGIN=$OTHER_PLUGIN NCCL_P2P_NET_CHUNKSIZE=524288 perf_row sendrecv --oneway -n 2 -b 64M -e 64M -w 3 --iters 20)
    add other_oneway_512k "$a"
  fi
  add plain_bidir "$($B/tcp_stream --bidir --repeat 1 --seconds 1 | sed -n 's/.* gbps_median=\([0-9.]*\).*/\1/p')"
  add plain_onethread "$($B/tcp_onethread | sed -n 's/.*gbps_mean=\([0-9.]*\).*/\1/p')"
  read -r _ a < <(BRAID_SOCKET_THREADS=0 perf_row sendrecv -n 2 -b 64M -e 64M -w 3 --iters 20)
  add braid_bidir "$a"
  read -r _ a < <(BRAID_SOCKET_THREADS=1 perf_row sendrecv -n 2 -b 64M -e 64M -w 3 --iters 20)
  add braid_bidir_t1 "$a"
  add plain_halfrtt "$($B/tcp_pingpong --iters 50000 | sed -n 's/.*half_rtt_us_median=\([0-9.]*\).*/\1/p')"
  add plain_exchange "$($B/tcp_pingpong --exchange --iters 50000 | sed -n 's/.*iter_us_median=\([0-9.]*\).*/\1/p')"
  read -r t _ < <(BRAID_SOCKET_THREADS=0 perf_row sendrecv -n 2 -b 8 -e 8 -w 2000 --iters 50000)
  add braid_8b_us "$t"
  read -r t _ < <(BRAID_SOCKET_THREADS=1 perf_row sendrecv -n 2 -b 8 -e 8 -w 2000 --iters 20000)
  add braid_8b_us_t1 "$t"
done


{
  echo "# braid p2p on loopback, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
  echo "# medians of $rounds interleaved rounds; GB/s = 1e9 bytes/s; raw values in brackets"
  printf '%-44s %8s   %s\n' "figure" "median" "ratio (target)"
  printf '%-44s %8s   [%s]\n' "plain TCP one way, 1 MiB writes (GB/s)" "$(m plain_oneway)" "${vals[plain_oneway]}"
  printf '%-44s %8s   %sx plain one way (>= 1.0)  [%s]\n' "braid sendrecv --oneway 64M, 128K pieces" "$(m braid_oneway_128k)" "$(ratio "$(m braid_oneway_128k)" "$(m plain_oneway)")" "${vals[braid_oneway_128k]}"
  printf '%-44s %8s   %sx plain one way (>= 1.2)  [%s]\n' "braid sendrecv --oneway 64M, 512K pieces" "$(m braid_oneway_512k)" "$(ratio "$(m braid_oneway_512k)" "$(m plain_oneway)")" "${vals[braid_oneway_512k]}"
  if [ -n "${OTHER_PLUGIN:-}" ]; then
    printf '%-44s %8s   braid/other %sx  [%s]\n' "$(basename "$OTHER_PLUGIN") --oneway 64M, 128K" "$(m other_oneway_128k)" "$(ratio "$(m braid_oneway_128k)" "$(m other_oneway_128k)")" "${vals[other_oneway_128k]}"
    printf '%-44s %8s   braid/other %sx  [%s]\n' "$(basename "$OTHER_PLUGIN") --oneway 64M, 512K" "$(m other_oneway_512k)" "$(ratio "$(m braid_oneway_512k)" "$(m other_oneway_512k)")" "${vals[other_oneway_512k]}"
  fi
  printf '%-44s %8s   [%s]\n' "plain TCP both directions, per direction" "$(m plain_bidir)" "${vals[plain_bidir]}"
  printf '%-44s %8s   %sx plain per direction  [%s]\n' "plain TCP both ways from one thread/process" "$(m plain_onethread)" "$(ratio "$(m plain_onethread)" "$(m plain_bidir)")" "${vals[plain_onethread]}"
  printf '%-44s %8s   %sx plain per direction (>= 0.95), %sx one-thread  [%s]\n' "braid sendrecv 64M, 2 ranks, per direction" "$(m braid_bidir)" "$(ratio "$(m braid_bidir)" "$(m plain_bidir)")" "$(ratio "$(m braid_bidir)" "$(m plain_onethread)")" "${vals[braid_bidir]}"
  printf '%-44s %8s   %sx plain per direction  [%s]\n' "  the same, 1 socket helper thread per comm" "$(m braid_bidir_t1)" "$(ratio "$(m braid_bidir_t1)" "$(m plain_bidir)")" "${vals[braid_bidir_t1]}"
  printf '%-44s %8s   [%s]\n' "plain TCP ping-pong half round trip (us)" "$(m plain_halfrtt)" "${vals[plain_halfrtt]}"
  printf '%-44s %8s   %sx half RTT  [%s]\n' "plain TCP exchange on 2 one-way conns (us)" "$(m plain_exchange)" "$(ratio "$(m plain_exchange)" "$(m plain_halfrtt)")" "${vals[plain_exchange]}"
  printf '%-44s %8s   %sx half RTT, %sx exchange (<= 1.3)  [%s]\n' "braid sendrecv 8 B time (us)" "$(m braid_8b_us)" "$(ratio "$(m braid_8b_us)" "$(m plain_halfrtt)")" "$(ratio "$(m braid_8b_us)" "$(m plain_exchange)")" "${vals[braid_8b_us]}"
  printf '%-44s %8s   %sx exchange  [%s]\n' "  the same, 1 socket helper thread per comm" "$(m braid_8b_us_t1)" "$(ratio "$(m braid_8b_us_t1)" "$(m plain_exchange)")" "${vals[braid_8b_us_t1]}"
} | tee "$out"
echo "# written to $out"
