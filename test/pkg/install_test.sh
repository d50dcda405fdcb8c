#!/usr/bin/env bash
# make install and make uninstall (tools/pkg/install.mk) into a DESTDIR, against lists written
# here, not taken from the Makefile:
#   (1) PREFIX=/usr/local: the three plugins in lib/<multiarch> (the compiler's), mode 644, the
#       same bytes as the build's; the six tools in bin/, mode 755; their manual pages in
#       share/man/man1, each with a NAME line and its program's --help text; README.md and
#       docs/ in share/doc/braid; nothing else;
#   (2) make uninstall removes every one of those files and share/doc/braid, and nothing else
#       (a file of someone else's in bin/ stays); a second uninstall does nothing and succeeds;
#   (3) PREFIX=/usr puts the plugins in /usr/lib/<multiarch>; MULTIARCH= in PREFIX/lib;
#   (4) tools/pkg/ldpath.sh names what to do for a folder the loader does not search;
#   (5) with no DESTDIR, as NCCL will meet it (root): in a private mount namespace (unshare -m)
#       whose /usr/local and /etc are overlays of the machine's, so nothing reaches the machine,
#       `make install` runs ldconfig, and the installed braid-perf with NCCL_NET_PLUGIN=braid
#       NCCL_TUNER_PLUGIN=braid and no LD_LIBRARY_PATH opens both plugins from
#       /usr/local/lib/<multiarch> (the loader says so, LD_DEBUG=libs); after `make uninstall`
#       the loader's cache names neither.  Not root, without the namespace (test/ns_check.sh: a
#       chroot, a container) or without overlayfs, this case is skipped with the reason; (1) to
#       (4) run anyway.
#   test/pkg/install_test.sh BUILD_DIR
# Prints "install: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f "$tmp/why" ] && sed 's/^/     /' "$tmp/why" | tail -n 25; rm -f "$tmp/why"; }
arch=$(gcc -print-multiarch)
libs=(libnccl-net-braid.so libnccl-tuner-braid.so libnccl-net-braidtrace.so)
bins=(braid-perf braid-stat braid-tune braid-sim braid-trace-shape braid-ps)
mk() { make -s BUILD="$B" "$@" >"$tmp/make.log" 2>&1 || { cp "$tmp/make.log" "$tmp/why"; return 1; }; }

# The files a DESTDIR holds, relative, sorted.
files() { (cd "$1" && find . \( -type f -o -type l \) | sed 's|^\./||' | LC_ALL=C sort); }
expected() { # PREFIX LIBDIR (relative)
  local p=${1#/}
  for l in "${libs[@]}"; do echo "$2/$l"; done
  for b in "${bins[@]}"; do echo "$p/bin/$b"; echo "$p/share/man/man1/$b.1"; done
  echo "$p/share/doc/braid/README.md"
  for d in docs/*.md docs/*.png; do echo "$p/share/doc/braid/${d##*/}"; done
}

# (1)
d=$tmp/d1
if ! mk install DESTDIR="$d" PREFIX=/usr/local; then bad "install PREFIX=/usr/local: make failed"
else
  expected /usr/local "usr/local/lib/$arch" | LC_ALL=C sort >"$tmp/want"
  files "$d" >"$tmp/got"
  if ! diff "$tmp/want" "$tmp/got" >"$tmp/why"; then bad "install PREFIX=/usr/local: the files differ from the list (< missing, > extra)"
  else rm -f "$tmp/why"; ok "install PREFIX=/usr/local: $(wc -l <"$tmp/got") files, plugins in usr/local/lib/$arch"; fi
  modes=""
  for l in "${libs[@]}"; do
    f=$d/usr/local/lib/$arch/$l
    [ "$(stat -c %a "$f" 2>/dev/null)" = 644 ] || modes+=" $l:$(stat -c %a "$f" 2>/dev/null)"
    cmp -s "$f" "$B/$l" || modes+=" $l:not-the-build's"
  done
  for b in "${bins[@]}"; do [ "$(stat -c %a "$d/usr/local/bin/$b" 2>/dev/null)" = 755 ] || modes+=" $b:$(stat -c %a "$d/usr/local/bin/$b" 2>/dev/null)"; done
  if [ -z "$modes" ]; then ok "plugins mode 644 and the build's bytes, tools mode 755"
  else echo "wrong:$modes" >"$tmp/why"; bad "modes or contents"; fi
  manbad=""
  for b in "${bins[@]}"; do
    m=$d/usr/local/share/man/man1/$b.1
    first=$("$B/$b" --help | head -n 1 | sed -e 's/\\/\\e/g' -e 's/-/\\-/g')
    grep -q "^\\.SH NAME" "$m" 2>/dev/null && grep -qF "$(sed 's/-/\\-/g' <<<"$b") \\- " "$m" &&
      grep -qF -- "$first" "$m" || manbad+=" $b"
  done
  if [ -z "$manbad" ]; then ok "manual pages: NAME line and the --help text"
  else echo "bad pages:$manbad" >"$tmp/why"; bad "manual pages"; fi
fi

# (2)
mkdir -p "$d/usr/local/bin" && echo theirs >"$d/usr/local/bin/someone-elses"
if ! mk uninstall DESTDIR="$d" PREFIX=/usr/local; then bad "uninstall: make failed"
else
  files "$d" >"$tmp/got"
  if [ "$(cat "$tmp/got")" != usr/local/bin/someone-elses ]; then
    { echo "left after uninstall (only usr/local/bin/someone-elses should be):"; cat "$tmp/got"; } >"$tmp/why"
    bad "uninstall removes exactly what install put there"
  elif [ -e "$d/usr/local/share/doc/braid" ]; then echo "share/doc/braid still there" >"$tmp/why"; bad "uninstall removes the doc folder"
  else ok "uninstall removes every installed file and share/doc/braid, leaves someone else's file"; fi
  if mk uninstall DESTDIR="$d" PREFIX=/usr/local; then ok "a second uninstall succeeds"; else bad "a second uninstall failed"; fi
fi

# (3)
if mk install DESTDIR="$tmp/d2" PREFIX=/usr && [ -f "$tmp/d2/usr/lib/$arch/libnccl-net-braid.so" ] &&
   [ -f "$tmp/d2/usr/lib/$arch/libnccl-tuner-braid.so" ] && [ -x "$tmp/d2/usr/bin/braid-ps" ]; then
  ok "install PREFIX=/usr: plugins in /usr/lib/$arch"
else [ -f "$tmp/why" ] || find "$tmp/d2" -name '*.so' >"$tmp/why"; bad "install PREFIX=/usr"; fi
if mk install DESTDIR="$tmp/d3" PREFIX=/opt/braid MULTIARCH= && [ -f "$tmp/d3/opt/braid/lib/libnccl-net-braid.so" ]; then
  ok "install MULTIARCH= PREFIX=/opt/braid: plugins in /opt/braid/lib"
else [ -f "$tmp/why" ] || find "$tmp/d3" -name '*.so' >"$tmp/why"; bad "install MULTIARCH="; fi

# (4)
if tools/pkg/ldpath.sh "$tmp/nowhere" >"$tmp/out" 2>&1 &&
   grep -q "does not find $tmp/nowhere/libnccl-net-braid.so" "$tmp/out" &&
   grep -q "NCCL_NET_PLUGIN=$tmp/nowhere/libnccl-net-braid.so" "$tmp/out"; then
  ok "ldpath.sh: a folder the loader does not search is reported with what to do"
else cp "$tmp/out" "$tmp/why"; bad "ldpath.sh"; fi

# (5)
cat >"$tmp/real.sh" <<'REAL'
set -eu
tmp=$1 B=$2 arch=$3
for d in /usr/local /etc; do
  mkdir -p "$tmp/ov$d/u" "$tmp/ov$d/w"
  mount -t overlay overlay -o "lowerdir=$d,upperdir=$tmp/ov$d/u,workdir=$tmp/ov$d/w" "$d" ||
    { echo "skip install-no-destdir (no overlay mount of $d here)"; exit 0; }
done
make -s BUILD="$B" install PREFIX=/usr/local
env -u LD_LIBRARY_PATH NCCL_NET_PLUGIN=braid NCCL_TUNER_PLUGIN=braid BRAID_SOCKET_IFNAME=lo LD_DEBUG=libs \
  /usr/local/bin/braid-perf allreduce --algo auto -n 2 -b 8 -e 64K -f 64 --iters 1 -w 1 >"$tmp/perf.out" 2>&1
for l in libnccl-net-braid.so libnccl-tuner-braid.so; do
  grep -q "calling init: /usr/local/lib/$arch/$l\$" "$tmp/perf.out" || { echo "not opened from /usr/local/lib/$arch: $l"; grep -E 'tuner|calling init|find library=libnccl' "$tmp/perf.out" | head; exit 1; }
done
echo "loaded by name from /usr/local/lib/$arch"
make -s BUILD="$B" uninstall PREFIX=/usr/local
if ldconfig -p | grep -q 'libnccl-.*-braid'; then echo "the loader's cache still names braid after uninstall"; exit 1; fi
echo "gone from the loader's cache after uninstall"
REAL
ns=(unshare --mount --propagation private)
if [ "$(id -u)" != 0 ]; then echo "skip install-no-destdir (needs root: mounts over /usr/local and /etc)"
elif ! why=$(test/ns_check.sh "${ns[@]:1}"); then echo "skip install-no-destdir ($why)"
elif "${ns[@]}" bash "$tmp/real.sh" "$tmp" "$(realpath "$B")" "$arch" >"$tmp/real.out" 2>&1; then
  if grep -q '^skip ' "$tmp/real.out"; then grep '^skip ' "$tmp/real.out"
  else ok "make install, no DESTDIR: ldconfig, NCCL_NET_PLUGIN=braid finds both plugins in /usr/local/lib/$arch; uninstall: gone"; fi
else cp "$tmp/real.out" "$tmp/why"; bad "make install with no DESTDIR (in a private mount namespace)"; fi

echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
