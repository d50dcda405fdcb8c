#!/usr/bin/env bash
# After `make install` (no DESTDIR): as root, refreshes the loader's cache (ldconfig), then says
# whether the dynamic loader finds the plugins installed in LIBDIR by name, as NCCL opens them
# (NCCL_NET_PLUGIN=braid dlopens "libnccl-net-braid.so"); when it does not, prints what to do.
#   tools/pkg/ldpath.sh LIBDIR
set -euo pipefail
libdir=$1
if [ "$(id -u)" = 0 ]; then ldconfig; fi
found=$(ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*libnccl-net-braid\.so .*=> //p' | head -n 1)
if [ "$found" = "$libdir/libnccl-net-braid.so" ]; then
  echo "braid: NCCL_NET_PLUGIN=braid and NCCL_TUNER_PLUGIN=braid now find $libdir/libnccl-*-braid.so"
  exit 0
fi
echo "braid: the dynamic loader does not find $libdir/libnccl-net-braid.so by name${found:+ (it finds $found first)}."
if [ "$(id -u)" != 0 ]; then echo "  As root, \`ldconfig\` refreshes its cache, if $libdir is in /etc/ld.so.conf.d/."; fi
echo "  Either add $libdir to /etc/ld.so.conf.d/ and run ldconfig, or give jobs"
echo "  LD_LIBRARY_PATH=$libdir, or the paths: NCCL_NET_PLUGIN=$libdir/libnccl-net-braid.so,"
echo "  NCCL_TUNER_PLUGIN=$libdir/libnccl-tuner-braid.so (which NCCL versions take a path: README)."
