#!/usr/bin/env bash
# make deb: braid's Debian packages (braid-nccl-plugins, braid-tools, braid-ps and their -dbgsym)
# built from this tree with dpkg-buildpackage and debian/, in a copy under OUT, so the checkout
# gets nothing but OUT: the .deb, .changes and .buildinfo files, and build.log.
#   tools/pkg/deb.sh [OUT]          (default build/deb; JOBS: parallel jobs, default: every CPU)
# The copy is the tree as git sees it, uncommitted changes included (tracked and new files, not
# ignored ones such as build/); without git, everything but build/.  debian/changelog's version
# must be common/version.h's.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/deb}
./tools/deps.sh deb

version=$(sed -n 's/^#define BRAID_VERSION "\(.*\)"/\1/p' common/version.h)
deb_version=$(dpkg-parsechangelog -S Version)
if [ "$version" != "$deb_version" ]; then
  echo "deb.sh: debian/changelog is at $deb_version, common/version.h at $version: add a changelog entry" >&2
  exit 1
fi

rm -rf "$out"
src=$out/src/braid-$version
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$src"
else
  tar --exclude=./build -cf - . | tar -xf - -C "$src"
fi

echo "deb.sh: dpkg-buildpackage in $src (log: $out/build.log)"
if ! (cd "$src" && dpkg-buildpackage -b -us -uc -J"${JOBS:-$(nproc)}") >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log" >&2
  echo "deb.sh: dpkg-buildpackage failed (log: $out/build.log)" >&2
  exit 1
fi
mv "$out"/src/*.deb "$out"/src/*.changes "$out"/src/*.buildinfo "$out"/
rm -rf "$out/src"
echo "deb.sh: built in $out:"
(cd "$out" && ls -1 ./*.deb | sed 's|^\./|  |')
