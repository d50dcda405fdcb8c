#!/usr/bin/env bash
# The ofi transport on loopback against libfabric's own fi_pingpong, same provider (tcp), same
# size (64 MiB), interleaved repeats in one run:
#   - fi_pingpong -p tcp -e rdm -S 64M: bytes per transfer / time per transfer;
#   - braid-perf sendrecv --oneway 64 MiB over BRAID_TRANSPORT=ofi as a user gets it (NCCL's
#     default 128 KiB network pieces, libfabric's own eager limit: frames above 16 KiB go by rxm's
#     rendezvous, each into a receive the receiver posted and granted), in 512 KiB pieces
#     (NCCL_P2P_NET_CHUNKSIZE=524288), one stream, and 2 streams striped with acknowledgements;
#   - the same with every frame eager (FI_OFI_RXM_EAGER_LIMIT=524288, what braid used to set);
#   - fi_pingpong at 128 KiB too: what one provider message of NCCL's default piece costs;
#   - braid-perf sendrecv (both directions at once) over ofi;
#   - the same --oneway over braid's socket transport, for context.
#   - BASELINE=DIR: another build folder's braid-perf and plugin (an earlier commit's, built
#     with make BUILD=DIR) in the same rounds, one stream in both piece sizes: before and after.
# The multi-rail netbed figures over ofi: BRAID_TRANSPORT=ofi FI_PROVIDER=tcp bench/multirail.sh.
# Usage: [REPEATS=5] [BASELINE=DIR] bench/ofi.sh   Writes bench/results/ofi-<date>.txt.  Needs
# fi_pingpong (apt-get install libfabric-bin).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/stats.sh
REPEATS=${REPEATS:-5}
command -v fi_pingpong >/dev/null || { echo "ofi bench: fi_pingpong missing: apt-get install libfabric-bin"; exit 1; }
mkdir -p bench/results
out=bench/results/ofi-$(date +%Y%m%d-%H%M%S).txt
PERF=$(realpath build/braid-perf)
PLUGIN=$(realpath build/libnccl-net-braid.so)
BASELINE=${BASELINE:-}
if [ -n "$BASELINE" ]; then
  BASE_PERF=$(realpath "$BASELINE/braid-perf") BASE_PLUGIN=$(realpath "$BASELINE/libnccl-net-braid.so")
fi
export NCCL_SOCKET_IFNAME=lo FI_PROVIDER=tcp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SIZE=$((64 << 20))

# pingpong SIZE ITERS: fi_pingpong's MB/s (10^6 bytes) of its transfers, as GB/s.
pingpong() {
  local port=$((30000 + RANDOM % 20000))
  fi_pingpong -p tcp -e rdm -I "$2" -S "$1" -B $port >"$tmp/srv" 2>&1 &
  local srv=$!
  sleep 0.3
  fi_pingpong -p tcp -e rdm -I "$2" -S "$1" -P $port 127.0.0.1 >"$tmp/cli" 2>&1 || true
  wait $srv || true
  awk 'NF == 8 && $2 ~ /^[0-9]+$/ {printf "%.3f", $6 / 1000}' "$tmp/cli"
}
# perf ARGS...: GB/s (algbw) of the 64 MiB row (base_perf: the same with BASELINE's build).
perf() { perf_with "$PERF" "$PLUGIN" "$@"; }
base_perf() { perf_with "$BASE_PERF" "$BASE_PLUGIN" "$@"; }
perf_with() {
  local bin=$1 plugin=$2; shift 2
  "$bin" "$@" -n 2 -b 64M -e 64M -w 2 -i 10 --plugin "$plugin" --timeout 60 >"$tmp/p" 2>&1 || { tail "$tmp/p" >&2; echo 0; return; }
  awk '/^ +[0-9]/ {g = $6} END {printf "%.3f", g}' "$tmp/p"
}

for r in $(seq 1 "$REPEATS"); do
  echo "# repeat $r/$REPEATS" >&2
  add pingpong "$(pingpong $SIZE 40)"
  add pingpong128 "$(pingpong 131072 400)"
  add ofi "$(BRAID_TRANSPORT=ofi perf sendrecv --oneway)"
  add ofi512 "$(NCCL_P2P_NET_CHUNKSIZE=524288 BRAID_TRANSPORT=ofi perf sendrecv --oneway)"
  add ofi_eager "$(FI_OFI_RXM_EAGER_LIMIT=524288 BRAID_TRANSPORT=ofi perf sendrecv --oneway)"
  add ofi2 "$(BRAID_TRANSPORT=ofi BRAID_NSTREAMS=2 perf sendrecv --oneway)"
  add ofi_bidir "$(BRAID_TRANSPORT=ofi perf sendrecv)"
  add socket "$(BRAID_TRANSPORT=socket perf sendrecv --oneway)"
  add socket512 "$(NCCL_P2P_NET_CHUNKSIZE=524288 BRAID_TRANSPORT=socket perf sendrecv --oneway)"
  if [ -n "$BASELINE" ]; then
    add base "$(BRAID_TRANSPORT=ofi base_perf sendrecv --oneway)"
    add base512 "$(NCCL_P2P_NET_CHUNKSIZE=524288 BRAID_TRANSPORT=ofi base_perf sendrecv --oneway)"
  fi
done
{
  echo "# braid ofi transport on loopback, $(date -u +%Y-%m-%dT%H:%MZ), libfabric $(fi_info --version 2>/dev/null | awk '/libfabric:/ {print $2}'), provider tcp, $(nproc) cores"
  echo "# 64 MiB; medians of $REPEATS interleaved repeats; GB/s (10^9 bytes/s); raw values in brackets"
  row() { printf '%-58s %7s   %s  [%s]\n' "$1" "$(m "$2")" "${3:+$(ratio "$(m "$2")" "$(m pingpong)")x fi_pingpong 64M$3}" "${vals[$2]}"; }
  row "fi_pingpong -p tcp -e rdm, 64 MiB messages" pingpong
  row "fi_pingpong -p tcp -e rdm, 128 KiB messages" pingpong128 " "
  row "braid ofi, --oneway 64 MiB (NCCL's 128 KiB pieces)" ofi " (>= 0.90)"
  row "braid ofi, --oneway 64 MiB, 512 KiB pieces" ofi512 " "
  row "braid ofi, --oneway 64 MiB, every frame eager (limit 512 KiB)" ofi_eager " "
  row "braid ofi, --oneway 64 MiB, 2 streams" ofi2 " "
  row "braid ofi, both ways at once 64 MiB" ofi_bidir " "
  row "braid socket, --oneway 64 MiB, 128 KiB pieces" socket " "
  row "braid socket, --oneway 64 MiB, 512 KiB pieces" socket512 " "
  if [ -n "$BASELINE" ]; then
    row "BASELINE braid ofi, --oneway 64 MiB (128 KiB pieces)" base " ($BASELINE)"
    row "BASELINE braid ofi, --oneway 64 MiB, 512 KiB pieces" base512 " "
    echo "# this build / BASELINE: $(ratio "$(m ofi)" "$(m base)")x (128 KiB pieces), $(ratio "$(m ofi512)" "$(m base512)")x (512 KiB pieces)"
  fi
} | tee "$out"
echo "# written to $out"
