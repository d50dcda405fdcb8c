#!/usr/bin/env bash
# Debian packages before any compile, under `make -j2` (the Makefile's deps stamps): a machine
# where a package is missing is played by stand-ins for dpkg-query, apt-get and id first on PATH
# (tools/deps.sh and the Makefile run unchanged), the compilers by wrappers that log each call,
# and the build goes into an empty BUILD, so no stamp exists yet:
#   (1) not root, libfabric-dev missing: make -k -j2 of every binary (all, the test programs,
#       the chaos and collshm plugins) fails, prints the exact `sudo apt-get install` line and
#       compiles or links nothing at all (-k builds whatever does not wait for the stamp);
#   (2) root, libfabric-dev missing: make -j2 of a few programs installs it first (apt-get
#       install libfabric-dev ends before the first compiler call), then builds; a second make
#       does not run apt-get again;
#   (3) root, libgtest-dev missing (a test package): a unit test's object is compiled only after
#       apt-get installed it.
#   test/integration/deps_first_test.sh
# Prints "deps-first: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/     /' "$tmp/calls" 2>/dev/null | tail -n 20; tail -n 20 "$tmp/out" | sed 's/^/     /'; }

bin=$tmp/bin
mkdir -p "$bin"
# dpkg-query -W -f='${Status}' PKG: every package installed but $FAKE_MISSING, until the fake
# apt-get has installed it.
cat >"$bin/dpkg-query" <<'EOF'
#!/bin/sh
for pkg; do :; done
if [ "$pkg" = "$FAKE_MISSING" ] && [ ! -e "$FAKE_DIR/installed" ]; then
  echo "dpkg-query: no packages found matching $pkg" >&2; exit 1
fi
printf 'install ok installed'
EOF
cat >"$bin/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $* (start)" >>"$FAKE_DIR/calls"
if [ "$1" = install ]; then sleep 2; touch "$FAKE_DIR/installed"; fi
echo "apt-get $* (end)" >>"$FAKE_DIR/calls"
EOF
cat >"$bin/id" <<'EOF'
#!/bin/sh
if [ "${1:-}" = -u ]; then echo "$FAKE_UID"; else exec /usr/bin/id "$@"; fi
EOF
for c in cc c++; do
  real=gcc; [ $c = c++ ] && real=g++
  printf '#!/bin/sh\necho "%s $*" >>"$FAKE_DIR/calls"\nexec %s "$@"\n' "$c" "$real" >"$bin/$c"
done
chmod +x "$bin"/*

# fresh UID MISSING: an empty fake machine state and build directory.
fresh() {
  rm -rf "$tmp/b" "$tmp/installed" "$tmp/calls"
  touch "$tmp/calls"
  export FAKE_UID=$1 FAKE_MISSING=$2 FAKE_DIR=$tmp
}
mk() { PATH="$bin:$PATH" make BUILD="$tmp/b" CC="$bin/cc" CXX="$bin/c++" "$@" >"$tmp/out" 2>&1; }
# first_line PATTERN: the line number of the first call matching PATTERN (0: none).
first_line() { grep -n -m 1 -E "$1" "$tmp/calls" | cut -d: -f1 || true; }

# (1) not root: nothing is compiled, the apt-get line is printed.
fresh 1000 libfabric-dev
b=$tmp/b
if mk -k -j2 all "$b/unit-tests" "$b/threads-test" "$b/sim-tests" "$b/libnccl-net-chaos.so" \
      "$b/libnccl-net-collshm.so"; then
  bad "not root: make succeeded with libfabric-dev missing"
elif ! grep -qx '  sudo apt-get install -y libfabric-dev' "$tmp/out"; then
  bad "not root: the apt-get line is not printed"
elif [ -s "$tmp/calls" ] || [ -n "$(find "$b" -type f 2>/dev/null)" ]; then
  bad "not root: something was compiled, installed or written before the packages were there: $(find "$b" -type f 2>/dev/null | head -n 3)"
else ok "not root: make -k -j2 of every binary compiles nothing, prints the apt-get line and fails"; fi

# (2) root: installed first, then compiled, once.
fresh 0 libfabric-dev
if ! mk -j2 "$b/braid-stat" "$b/tcp_stream" "$b/obj/net_plugin/transport/ofi/ofi.o"; then
  bad "root: make failed"
else
  inst=$(first_line '^apt-get install .*libfabric-dev \(end\)') cc=$(first_line '^(cc|c\+\+) ')
  if [ -z "$inst" ] || [ -z "$cc" ] || [ "$inst" -gt "$cc" ]; then
    bad "root: apt-get install libfabric-dev (call ${inst:-none}) did not end before the first compile (call ${cc:-none})"
  elif ! grep -q '^apt-get install .* libfabric-dev (start)$' "$tmp/calls" ||
       [ "$(grep -c '^apt-get install' "$tmp/calls")" -ne 2 ]; then
    bad "root: not exactly one apt-get install of libfabric-dev"
  else
    : >"$tmp/calls"
    if ! mk -j2 "$b/braid-stat" "$b/tcp_stream" || grep -q apt-get "$tmp/calls"; then
      bad "root: a second make ran apt-get again or failed"
    else ok "root: make -j2 installs libfabric-dev, then compiles; the next make does not install"; fi
  fi
fi

# (3) a test package, before a test's object.
fresh 0 libgtest-dev
if ! mk -j2 "$b/obj/test/unit/tmpfile_test.o" "$b/obj/common/log.o"; then
  bad "test package: make failed"
else
  inst=$(first_line '^apt-get install .*libgtest-dev \(end\)') cxx=$(first_line '^c\+\+ .*tmpfile_test')
  if [ -z "$inst" ] || [ -z "$cxx" ] || [ "$inst" -gt "$cxx" ]; then
    bad "test package: apt-get install libgtest-dev (call ${inst:-none}) did not end before the test's compile (call ${cxx:-none})"
  else ok "test package: libgtest-dev installed before a unit test's object is compiled"; fi
fi

echo "deps-first: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
