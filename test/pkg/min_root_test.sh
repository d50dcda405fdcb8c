#!/usr/bin/env bash
# The README's two commands on a minimal Debian root, as a new user meets one in a container-like
# root (suite minimal-root, issue 35).  The root is test/pkg/min_root.sh's (debootstrap minbase and
# `apt-get install make gcc`, cached); this tree is copied into its /root/braid (the files git
# sees, uncommitted changes included; no .git); commands run in it by chroot, as root, with a
# clean environment and the host's /proc, /sys and /dev bound in:
#   pass 1, the root a plain folder, as `chroot ROOT` enters it: `make run` (-j$JOBS) passes
#           (tools/deps.sh installs what the build needs), then `make test SUITE="$PASS1"`
#           (deps.sh installs what the tests need): no FAIL, and every SKIP names the chroot's
#           limit ("/ is not a mount point": no mount or network namespace, test/ns_check.sh);
#           loads-anywhere and install have run the parts that need none;
#   pass 2, the root bound on itself first (mount --bind ROOT ROOT, the remedy those skips name):
#           `make test SUITE="$PASS2"` (netbed: its striping case) and deb-install's script on
#           pass 1's packages (not built again): every suite PASS.
# Nothing reaches the machine: the root is a copy of the cached one, its mounts in a namespace of
# this script's, all removed at the end; the output is kept in build/test-logs/minimal-root/.  The
# packages apt downloads are kept in CACHE/apt-minroot, pass 2's Debian root of deb-install in
# CACHE/cache-minroot; apt still reads the Debian mirror each run.
#   test/pkg/min_root_test.sh          the check above (make test's suite)
#   test/pkg/min_root_test.sh --full   by hand: pass 1 with the whole `make test`, nothing cached
#                                      but the packages (docs/contributing.md: how long it took)
# Prints one line per check, "ok" or "FAIL", then "minimal-root: N passed, N failed".  Skips
# (exit 77) without root, without a private mount namespace, or with no Debian mirror.
# Environment: BRAID_VM_CACHE (default /var/cache/braid-vm), JOBS (make -j, default 2).
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/../.."
PASS1="sim source-paths loads-anywhere install deb-install netbed"
PASS2="loads-anywhere install netbed"
cache=${BRAID_VM_CACHE:-/var/cache/braid-vm}
jobs=${JOBS:-2}

if [ "${1:-}" != --in-namespace ]; then
  full=0
  [ "${1:-}" = --full ] && full=1
  if [ "$(id -u)" != 0 ]; then echo "minimal-root: skipped (needs root: chroot, mounts)"; exit 77; fi
  why=$(test/ns_check.sh --mount --propagation private) ||
    { echo "minimal-root: skipped (the root's mounts need a namespace: $why)"; exit 77; }
  dir=$(test/pkg/min_root.sh)
  case $? in
    0) ;;
    3) echo "minimal-root: skipped (no minimal Debian root: debootstrap or apt-get failed, no Debian mirror?)"; exit 77 ;;
    *) echo "minimal-root: could not make the minimal Debian root"; exit 1 ;;
  esac
  mkdir -p "$cache/apt-minroot/partial" "$cache/cache-minroot"
  exec 9>"$cache/.minroot-run.lock" # one run at a time: they share apt's cache of packages
  flock 9
  work=$(mktemp -d "${TMPDIR:-/var/tmp}/braid-minroot.XXXXXX") # the root grows by 2 GB
  trap 'rm -rf "$work"' EXIT
  # Every mount below is in this namespace and ends with it, before rm -rf runs.
  unshare --mount --propagation private "$self" --in-namespace "$dir" "$work" "$full"
  exit
fi

dir=$2 work=$3 full=$4
R=$work/root
log=build/test-logs/minimal-root # make run's and make test's output; the root's test logs
rm -rf "$log"
mkdir -p "$log"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -s "$2" ] && tail -n 40 "$2" | sed 's/^/     /'; }
finish() {
  cp -r "$R/root/braid/build/test-logs" "$log/root-test-logs" 2>/dev/null
  echo "minimal-root: $pass passed, $fail failed (logs: $log)"; [ "$fail" -eq 0 ]; exit
}

set -e
# A copy, not an overlay: an overlay's upper layer cannot be on overlayfs, and install's own case
# mounts one from the root's /tmp.
cp -a "$dir/root" "$R"
[ -f /etc/resolv.conf ] && cp -L /etc/resolv.conf "$R/etc/resolv.conf"
mkdir "$R/root/braid"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$R/root/braid"
else
  tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C "$R/root/braid"
fi
mount --bind "$cache/apt-minroot" "$R/var/cache/apt/archives"
mount --bind /proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
set +e
os=$(. "$R/etc/os-release"; echo "$PRETTY_NAME")

# in_root SECONDS LOG COMMAND: COMMAND (a shell line) in /root/braid, as a fresh login has it.
in_root() {
  timeout "$1" chroot "$R" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root bash -c "cd /root/braid && $3" >"$2" 2>&1
}
# summary LOG: make test's closing line.
summary() { grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" | tail -n 1; }
tlog=$R/root/braid/build/test-logs

# ---- pass 1: a plain chroot ----
t0=$SECONDS
if in_root 1200 "$log/run" "make -j$jobs run" && grep -q 'Out of bounds values : 0 OK' "$log/run"; then
  ok "make run in a chroot of a fresh $os minbase root with make and gcc ($((SECONDS - t0)) s)"
else bad "make run in the minimal root" "$log/run"; finish; fi

t0=$SECONDS
if [ "$full" = 1 ]; then what="make test"; else what="make test SUITE=\"$PASS1\""; fi
in_root 3600 "$log/test1" "$what"
rc=$?
sum=$(summary "$log/test1")
others=$(grep '^SKIP ' "$log/test1" | grep -v '/ is not a mount point')
if [ $rc -eq 0 ] && [ -n "$sum" ] && ! grep -q '^FAIL ' "$log/test1" && [ -z "$others" ]; then
  ok "$what: $sum ($((SECONDS - t0)) s); every skip: / is not a mount point"
else
  [ -z "$others" ] || { echo "skips that name another limit:"; echo "$others"; } >>"$log/test1"
  bad "$what in the minimal root (exit $rc): ${sum:-no summary}" "$log/test1"
fi
if [ "$(grep -c '^ok   needed-' "$tlog/loads-anywhere.log" 2>/dev/null)" = 2 ] &&
   grep -qE '^install: [1-9][0-9]* passed, 0 failed$' "$tlog/install.log" 2>/dev/null; then
  ok "what needs no namespace ran: loads-anywhere's NEEDED checks, install's $(grep -oE '^install: [0-9]+ passed' "$tlog/install.log" | cut -d' ' -f2) cases"
else cat "$tlog/loads-anywhere.log" "$tlog/install.log" >"$log/parts" 2>&1; bad "the parts that need no namespace" "$log/parts"; fi
[ "$full" = 1 ] && finish

# ---- pass 2: the root bound on itself, as the skips advise ----
mount --rbind "$R" "$R"
mkdir -p "$R/var/cache/braid-vm"
mount --bind "$cache/cache-minroot" "$R/var/cache/braid-vm"
t0=$SECONDS
in_root 1200 "$log/test2" "NETBED_ONLY=striping make test SUITE=\"$PASS2\""
rc=$?
sum=$(summary "$log/test2")
if [ $rc -eq 0 ] && [[ $sum == *" passed, 0 failed, 0 skipped" ]]; then
  ok "the root bound on itself: make test SUITE=\"$PASS2\": $sum ($((SECONDS - t0)) s)"
else bad "the root bound on itself: make test SUITE=\"$PASS2\" (exit $rc): ${sum:-no summary}" "$log/test2"; fi
t0=$SECONDS
if in_root 600 "$log/deb-install" "test/pkg/deb_install_test.sh build/deb"; then
  ok "the root bound on itself: deb-install: $(tail -n 1 "$log/deb-install" | sed 's/^deb-install: //') ($((SECONDS - t0)) s)"
else bad "the root bound on itself: deb-install (exit $?)" "$log/deb-install"; fi
finish
