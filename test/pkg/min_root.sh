#!/usr/bin/env bash
# The minimal Debian root of suite minimal-root (test/pkg/min_root_test.sh), made once and cached:
# `debootstrap --variant=minbase`, then `apt-get install make gcc` in it, as a new user readies a
# container-like root for the README's two commands.  The root is DIR/root (not DIR), so that a
# chroot into it through an overlay of DIR enters a folder that is not a mount point, as a plain
# `chroot ROOT` does.  Prints DIR.  Keyed by suite and mirror; older roots are removed.
#   test/pkg/min_root.sh
# Exit 3: the root cannot be had here (debootstrap or apt-get failed: no Debian mirror); 1: other
# errors.  Environment: BRAID_VM_CACHE (default /var/cache/braid-vm), BRAID_VM_MIRROR,
# BRAID_VM_SUITE (as test/pkg/deb_root.sh).
set -euo pipefail
cache=${BRAID_VM_CACHE:-/var/cache/braid-vm}
suite=${BRAID_VM_SUITE:-bookworm}
mirror=${BRAID_VM_MIRROR:-http://deb.debian.org/debian}
pkgs=(make gcc)
key=$(printf '%s\n' "$suite" "$mirror" "${pkgs[@]}" | sha256sum | cut -c1-16)
dir=$cache/minroot-$key
if [ -f "$dir/.complete" ]; then echo "$dir"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.minroot.lock"
flock 9
if [ -f "$dir/.complete" ]; then echo "$dir"; exit 0; fi
for old in "$cache"/minroot-*; do [ -e "$old" ] && rm -rf "$old"; done
unavailable() {
  tail -n 20 "$cache/debootstrap-minroot.log" >&2
  for m in proc sys dev/pts dev; do umount "$dir.tmp/root/$m" 2>/dev/null || true; done
  rm -rf "$dir.tmp"
  echo "min_root: unavailable: $1 (log: $cache/debootstrap-minroot.log)" >&2
  exit 3
}
echo "min_root: debootstrap --variant=minbase $suite ($mirror), then apt-get install ${pkgs[*]}" >&2
t0=$SECONDS
mkdir -p "$dir.tmp"
debootstrap --variant=minbase "$suite" "$dir.tmp/root" "$mirror" >"$cache/debootstrap-minroot.log" 2>&1 ||
  unavailable "debootstrap failed"
chroot "$dir.tmp/root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  sh -c "apt-get update && apt-get install -y ${pkgs[*]}" >>"$cache/debootstrap-minroot.log" 2>&1 ||
  unavailable "apt-get install ${pkgs[*]} failed in the root"
rm -f "$dir.tmp"/root/var/cache/apt/archives/*.deb
touch "$dir.tmp/.complete"
mv "$dir.tmp" "$dir"
echo "min_root: root ready in $((SECONDS - t0)) s ($(du -sh "$dir" | cut -f1))" >&2
echo "$dir"
