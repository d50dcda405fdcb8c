#!/usr/bin/env bash
# The Debian packages on a fresh machine (suite deb-install): the .deb files of `make deb`
# installed into a fresh Debian root (test/pkg/deb_root.sh: debootstrap, cached), the plugins
# used by name with no LD_LIBRARY_PATH, braid-ps started by its unit's ExecStart= and used for a
# CollNet allreduce, the packages purged and the root checked for leftovers
# (test/pkg/in_root.sh, in namespaces of its own).
#   test/pkg/deb_install_test.sh [DEB_DIR]        (default build/deb; make deb first)
# Skips (exit 77) without root, where the namespaces cannot be made (test/ns_check.sh: a chroot, a
# container), or when no root can be bootstrapped (no Debian mirror); all before any of braid runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
debs=${1:-build/deb}
if [ "$(id -u)" != 0 ]; then echo "deb-install: skipped (needs root: chroot, mounts, namespaces)"; exit 77; fi
ns=(--mount --net --pid --fork --propagation private)
why=$(test/ns_check.sh "${ns[@]}") || { echo "deb-install: skipped (the root's namespaces: $why)"; exit 77; }
for d in braid-nccl-plugins braid-tools braid-ps; do
  f=$(ls "$debs/${d}"_*.deb 2>/dev/null | head -n 1)
  [ -n "$f" ] || { echo "deb-install: no $debs/${d}_*.deb: run make deb first"; exit 1; }
  files+=("$f")
done
root=$(test/pkg/deb_root.sh "${files[@]}")
case $? in
  0) ;;
  3) echo "deb-install: skipped (no fresh Debian root: debootstrap failed, no Debian mirror?)"; exit 77 ;;
  *) echo "deb-install: could not make the Debian root"; exit 1 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every mount of in_root.sh is in the new mount namespace and ends with it, before rm -rf runs.
unshare "${ns[@]}" test/pkg/in_root.sh "$root" "$(realpath "$debs")" "$work"
