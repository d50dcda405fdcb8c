#!/usr/bin/env bash
# Installs (as root) or names (otherwise) the Debian packages braid needs.
#   deps.sh build   compilers and libraries for `make`
#   deps.sh test    plus what `make test` uses (GoogleTest, clang's libFuzzer, iproute2, nftables,
#                   procps, git for source-paths, python3 for collnet; for the packages' suites,
#                   what deb needs, lintian and debootstrap); the test guest's own (qemu, the
#                   kernel) are installed by tools/vm/build-image.sh
#   deps.sh deb     plus Debian's packaging tools, for `make deb`
set -euo pipefail
what=${1:-build}
pkgs=(gcc g++ make libsodium-dev libhwloc-dev libcairo2-dev pkgconf libfabric-dev libibverbs-dev)
deb=(build-essential dpkg-dev debhelper)
if [ "$what" = test ]; then pkgs+=(libgtest-dev clang libclang-rt-dev iproute2 nftables procps
  git python3 "${deb[@]}" lintian debootstrap); fi
if [ "$what" = deb ]; then pkgs+=("${deb[@]}"); fi
if [ "$what" = bench ]; then pkgs+=(iproute2 nftables iperf3 bc gnuplot-nox libfabric-bin); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "braid: installing missing packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
else
  echo "braid: missing packages. Install them with:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
