#!/usr/bin/env bash
# The packages' test proper, run by test/pkg/deb_install_test.sh in namespaces of its own
# (unshare --mount --net --pid --fork: every mount below and every process it starts end with
# it; its network is a loopback of its own, so braid-ps takes its configured port 9555).
#   test/pkg/in_root.sh LOWER DEB_DIR WORK
# LOWER, the cached fresh Debian root, is the lower layer of an overlay at WORK/root (or, where
# overlayfs cannot be mounted, copied there), so it is never written.  In the root, with a clean environment (no LD_LIBRARY_PATH):
#   install   apt-get install of the three .deb files (not the -dbgsym ones), offline: the root
#             holds their dependencies; the command tools/pkg/Dockerfile runs;
#   checks    the plugins in /usr/lib/<multiarch>; braid-perf with NCCL_NET_PLUGIN=braid and
#             NCCL_TUNER_PLUGIN=braid loads both from there by name; braid-trace (by name) wraps
#             it; the braid-ps system user; the unit enabled and passing systemd-analyze verify;
#             the config a conffile;
#   service   the token file made as docs/install.md says (braid-ps's own, mode 600), then the
#             unit's ExecStart= line run as its User= with no new privileges
#             (test/pkg/execstart.sh); a CollNet allreduce against it, whose session braid-ps
#             logs; SIGTERM stops it with status 0;
#   purge     apt-get purge of the three, then the root's files against the list taken before the
#             install (test/pkg/leftovers.sh).
# Prints one line per check, "ok" or "FAIL", then "deb-install: N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lower=$1 debs=$2 work=$3
root=$work/root log=$work/logs
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -s "$log/out" ] && tail -n 25 "$log/out" | sed 's/^/     /'; }
finish() { echo "deb-install: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
mkdir -p "$work/upper" "$work/ovl" "$root" "$log"

if ! mount -t overlay overlay -o "lowerdir=$lower,upperdir=$work/upper,workdir=$work/ovl" "$root" 2>"$log/out"; then
  echo "     (no overlay mount here: $(head -n 1 "$log/out"); a copy of the root instead)"
  cp -a "$lower/." "$root/"
fi
set -e
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
ip link set lo up
set +e
# A command in the root, with only what a login shell would set: no LD_LIBRARY_PATH.  (exec:
# a command started in the background keeps the pid $! names.)
exec_in_root() { exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
in_root() { (exec_in_root "$@"); }
run() { in_root "$@" >"$log/out" 2>&1; } # the output in $log/out for bad()

"$here/leftovers.sh" list "$root" >"$work/before"
for f in passwd group shadow gshadow; do cp "$root/etc/$f" "$work/before.$f"; done

# ---- install ----
mkdir "$root/tmp/debs"
cp "$debs"/braid-nccl-plugins_*.deb "$debs"/braid-tools_*.deb "$debs"/braid-ps_*.deb "$root/tmp/debs/"
deb_files=()
for f in "$root"/tmp/debs/*.deb; do deb_files+=("/tmp/debs/$(basename "$f")"); done
# (chroot starts in /, so the files are named by their path in the root.)
if run env DEBIAN_FRONTEND=noninteractive apt-get install -y "${deb_files[@]}"; then
  ok "apt-get install of the three packages, offline, in a fresh $(. "$root/etc/os-release"; echo "$PRETTY_NAME") root"
else bad "apt-get install"; finish; fi

libdir=$(dirname "$(in_root dpkg -L braid-nccl-plugins | grep '/libnccl-net-braid\.so$')")
if [[ $libdir == /usr/lib/*-linux-gnu ]] && [ -f "$root$libdir/libnccl-tuner-braid.so" ] &&
   [ -f "$root$libdir/libnccl-net-braidtrace.so" ] &&
   grep -qE "libnccl-net-braid\.so .*=> (/usr)?${libdir#/usr}/libnccl-net-braid\.so$" <<<"$(in_root ldconfig -p)"; then
  ok "plugins in $libdir, in the loader's cache"
else { echo "libdir: $libdir"; in_root ldconfig -p | grep nccl; } >"$log/out" 2>&1; bad "plugins in /usr/lib/<multiarch>"; fi

# ---- the plugins, by name, from the loader's default path ----
# LD_DEBUG=libs: the loader says which file each name resolved to ("calling init: FILE").
loaded() { grep -qE "calling init: (/usr)?${libdir#/usr}/$1\$" "$log/out"; }
if run env NCCL_NET_PLUGIN=braid NCCL_TUNER_PLUGIN=braid BRAID_SOCKET_IFNAME=lo LD_DEBUG=libs \
     braid-perf allreduce --algo auto -n 2 -b 8 -e 1M -f 32 --iters 2 -w 1 &&
   grep -qF 'plugin "braid" from libnccl-net-braid.so' "$log/out" && loaded libnccl-net-braid.so &&
   grep -qF 'tuner "braid" from libnccl-tuner-braid.so' "$log/out" && loaded libnccl-tuner-braid.so &&
   ! grep -q 'LD_LIBRARY_PATH' <(in_root env); then
  ok "braid-perf, NCCL_NET_PLUGIN=braid NCCL_TUNER_PLUGIN=braid: both plugins from $libdir, no LD_LIBRARY_PATH"
else bad "braid-perf with the installed plugins"; fi
if run env NCCL_NET_PLUGIN=braidtrace BRAID_SOCKET_IFNAME=lo BRAID_TRACE_FILE=/tmp/trace.%p LD_DEBUG=libs \
     braid-perf sendrecv -n 2 -b 8 -e 64K -f 8 --iters 2 -w 1 &&
   loaded libnccl-net-braidtrace.so && loaded libnccl-net-braid.so &&
   run sh -c 'braid-trace-shape "$(ls /tmp/trace.* | paste -sd, -)"'; then
  ok "braid-trace (NCCL_NET_PLUGIN=braidtrace) wraps braid; braid-trace-shape reads its traces"
else bad "braid-trace"; fi

# ---- braid-ps: user, unit, config ----
pw=$(in_root getent passwd braid-ps)
IFS=: read -r _ _ uid gid _ home shell <<<"$pw"
if [ -n "$pw" ] && [ "$uid" -lt 1000 ] && [ "$home" = /nonexistent ] && [ ! -e "$root/nonexistent" ] &&
   [ "$shell" = /usr/sbin/nologin ] && [ "$(in_root getent group braid-ps | cut -d: -f3)" = "$gid" ]; then
  ok "system user braid-ps (uid $uid, group braid-ps, home /nonexistent, no login shell)"
else echo "getent: $pw" >"$log/out"; bad "system user braid-ps"; fi
unit=/lib/systemd/system/braid-ps.service
if [ "$(readlink "$root/etc/systemd/system/multi-user.target.wants/braid-ps.service")" = "$unit" ]; then
  ok "braid-ps.service enabled (multi-user.target)"
else ls -l "$root/etc/systemd/system/multi-user.target.wants/" >"$log/out" 2>&1; bad "braid-ps.service enabled"; fi
# (--man=no: the root has no man-db to look Documentation=man:braid-ps(1) up; the page's file is
# checked instead.)
if run systemd-analyze verify --man=no "$unit" && ! grep -q . "$log/out" &&
   [ -f "$root/usr/share/man/man1/braid-ps.1.gz" ]; then ok "systemd-analyze verify $unit: no complaint"
else bad "systemd-analyze verify $unit"; fi
if grep -q '^ /etc/braid/braid-ps.conf ' <<<"$(in_root dpkg-query -W -f='${Conffiles}\n' braid-ps)"; then
  ok "/etc/braid/braid-ps.conf is a conffile"
else bad "/etc/braid/braid-ps.conf is not a conffile"; fi

# ---- the token, as docs/install.md makes it ----
token=/etc/braid/braid-ps.token
run sh -c "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | install -o braid-ps -g braid-ps -m 600 /dev/stdin $token"
if [ "$(stat -c '%u %g %a' "$root$token" 2>/dev/null)" = "$uid $gid 600" ]; then
  if ! run setpriv --reuid=nobody --regid=nogroup --clear-groups cat "$token"; then
    ok "token file: braid-ps's, mode 600, unreadable by another user"
  else bad "token file readable by nobody"; fi
else stat "$root$token" >"$log/out" 2>&1; bad "token file owner and mode"; fi

# ---- the unit's ExecStart=, as its User= ----
user=$(sed -n 's/^User=//p' "$root$unit") group=$(sed -n 's/^Group=//p' "$root$unit")
nnp=$(sed -n 's/^NoNewPrivileges=//p' "$root$unit")
mapfile -t argv < <("$here/execstart.sh" "$root" "$unit")
mapfile -t envs < <("$here/execstart.sh" --env "$root" "$unit")
listen=$(printf '%s\n' "${envs[@]}" | sed -n 's/^BRAID_PS_LISTEN=//p')
port=${listen##*:}
if [ ${#argv[@]} -eq 0 ] || [ "$user" != braid-ps ] || [ "$group" != braid-ps ] || [ "$nnp" != yes ] || [ -z "$port" ]; then
  printf 'User=%s Group=%s NoNewPrivileges=%s port=%s ExecStart: %s\n' "$user" "$group" "$nnp" "$port" "${argv[*]}" >"$log/out"
  bad "the unit's User=, Group=, NoNewPrivileges=, ExecStart= and BRAID_PS_LISTEN"; finish
fi
echo "     ExecStart= as systemd would run it: ${argv[*]}"
(exec_in_root "${envs[@]}" setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs -- \
  "${argv[@]}" >"$log/ps.out" 2>"$log/ps.err") &
ps_pid=$!
for _ in $(seq 100); do grep -q 'listening on' "$log/ps.out" && break; kill -0 $ps_pid 2>/dev/null || break; sleep 0.1; done
status=$(cat "$root/proc/$ps_pid/status" 2>/dev/null) # this pid namespace's /proc
if grep -q 'listening on' "$log/ps.out" && grep -qE "^Uid:[[:space:]]+$uid[[:space:]]" <<<"$status" &&
   grep -qE '^NoNewPrivs:[[:space:]]+1' <<<"$status" && ! grep -qi warning "$log/ps.err"; then
  ok "braid-ps started by the unit's ExecStart= as braid-ps: $(head -n 1 "$log/ps.out")"
else cat "$log/ps.out" "$log/ps.err" >"$log/out"; grep -E '^(Uid|NoNewPrivs)' <<<"$status" >>"$log/out"; bad "braid-ps from ExecStart="; finish; fi

# ---- a CollNet allreduce against it ----
if run env NCCL_NET_PLUGIN=braid BRAID_SOCKET_IFNAME=lo BRAID_PS_SERVERS="127.0.0.1:$port" \
     BRAID_PS_TOKEN="$(cat "$root$token")" braid-perf allreduce --algo collnet -n 3 -b 4 -e 4M -f 16 --iters 2 -w 1; then
  for _ in $(seq 50); do grep -q 'closed: 3 ranks' "$log/ps.err" && break; sleep 0.1; done
  if grep -q 'closed: 3 ranks (3 joined)' "$log/ps.err"; then
    ok "CollNet allreduce through the service's braid-ps: $(grep -o 'closed: 3 ranks.*' "$log/ps.err" | head -n 1 | cut -c1-70)"
  else cp "$log/ps.err" "$log/out"; bad "braid-ps logged no session of the 3 ranks"; fi
else bad "CollNet allreduce against braid-ps"; fi
kill -TERM $ps_pid
for _ in $(seq 100); do kill -0 $ps_pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $ps_pid 2>/dev/null; then kill -KILL $ps_pid; bad "braid-ps still running 10 s after SIGTERM"
elif wait $ps_pid; then ok "SIGTERM: braid-ps exits with status 0"
else cp "$log/ps.err" "$log/out"; bad "braid-ps exited non-zero after SIGTERM"; fi

# ---- purge, and what is left ----
if run env DEBIAN_FRONTEND=noninteractive apt-get purge -y braid-ps braid-tools braid-nccl-plugins &&
   known=$(in_root dpkg-query -W -f='${Package}\n') && [ -n "$known" ] && ! grep -q '^braid' <<<"$known"; then
  ok "apt-get purge: dpkg knows none of the three any more"
else grep '^braid' <<<"$known" >>"$log/out"; bad "apt-get purge"; fi
"$here/leftovers.sh" list "$root" >"$work/after"
if "$here/leftovers.sh" compare "$work" "$root" >"$log/out" 2>&1; then ok "nothing left behind: $(tail -n 1 "$log/out")"
else bad "left behind after purge"; fi
finish
