#!/usr/bin/env bash
# The fresh Debian root the packages' test installs them into, built once and cached: a
# debootstrap minbase root (as tools/vm/build-image.sh makes the test guest's) holding what the
# packages depend on and recommend, first alternatives, read from the .deb files themselves, plus
# systemd (a server's init: systemd-analyze checks the unit, debhelper's scripts enable it).
# Prints the root's path.  The cache is keyed by suite, mirror and package list, so a package
# that gains a dependency gets a new root; older roots are removed.
#   test/pkg/deb_root.sh DEB...
# Exit 3: the root cannot be had here (debootstrap failed: no Debian mirror); 1: other errors.
# Environment: BRAID_VM_CACHE (default /var/cache/braid-vm), BRAID_VM_MIRROR, BRAID_VM_SUITE.
set -euo pipefail
cache=${BRAID_VM_CACHE:-/var/cache/braid-vm}
suite=${BRAID_VM_SUITE:-bookworm}
mirror=${BRAID_VM_MIRROR:-http://deb.debian.org/debian}
[ $# -gt 0 ] || { echo "usage: deb_root.sh DEB..." >&2; exit 1; }

ours=$(for d in "$@"; do dpkg-deb -f "$d" Package; done)
pkgs=$(for d in "$@"; do dpkg-deb -f "$d" Depends Recommends | sed 's/^[A-Za-z-]*: //'; done |
  tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g' | grep -v '^$' |
  grep -vxF -f <(echo "$ours") | { cat; echo systemd; } | LC_ALL=C sort -u)
key=$(printf '%s\n' "$suite" "$mirror" $pkgs | sha256sum | cut -c1-16)
root=$cache/pkgroot-$key
if [ -f "$root/.complete" ]; then echo "$root"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.pkgroot.lock"
flock 9
if [ -f "$root/.complete" ]; then echo "$root"; exit 0; fi
for old in "$cache"/pkgroot-*; do [ -e "$old" ] && rm -rf "$old"; done
echo "deb_root: debootstrap --variant=minbase $suite ($mirror) with: $(echo $pkgs)" >&2
t0=$SECONDS
if ! debootstrap --variant=minbase --include="$(echo $pkgs | tr ' ' ,)" "$suite" "$root.tmp" "$mirror" \
     >"$cache/debootstrap-pkgroot.log" 2>&1; then
  tail -n 20 "$cache/debootstrap-pkgroot.log" >&2
  for m in proc sys dev/pts dev; do umount "$root.tmp/$m" 2>/dev/null || true; done
  rm -rf "$root.tmp"
  echo "deb_root: unavailable: debootstrap failed (log: $cache/debootstrap-pkgroot.log)" >&2
  exit 3
fi
# apt's lists are not needed (the test installs local .deb files, offline); the rest stays as a
# fresh machine has it.
rm -rf "$root.tmp"/var/lib/apt/lists/* "$root.tmp"/var/cache/apt/*.bin "$root.tmp"/var/cache/apt/archives/*.deb
touch "$root.tmp/.complete"
mv "$root.tmp" "$root"
echo "deb_root: root ready in $((SECONDS - t0)) s ($(du -sh "$root" | cut -f1))" >&2
echo "$root"
