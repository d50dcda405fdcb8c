#!/usr/bin/env bash
# By hand, not in make test (whose package test runs the unit's ExecStart= itself, without an
# init): braid-ps's unit under a booted systemd, in a systemd-nspawn container of the packages'
# fresh Debian root (test/pkg/deb_root.sh) with the packages installed.  A probe unit in it checks:
#   - without /etc/braid/braid-ps.token the service is skipped (ConditionPathExists), not failed;
#   - with it, `systemctl start` runs it under every hardening option of the unit, and a CollNet
#     allreduce of 3 ranks against it passes and is logged as one session in the journal;
#   - killed with SIGKILL (a crash), it is restarted (Restart=on-failure);
#   - `systemctl stop` (SIGTERM) ends it with status 0, Result=success;
# and prints `systemd-analyze security`'s exposure score.  Root; installs systemd-container.
#   test/pkg/systemd_check.sh [DEB_DIR]        (default build/deb; make deb first)
# Prints "systemd-check: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
debs=$(realpath "${1:-build/deb}")
[ "$(id -u)" = 0 ] || { echo "systemd-check: needs root"; exit 77; }
if [ "${2:-}" != --in-namespace ]; then
  command -v systemd-nspawn >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends systemd-container >/dev/null || { echo "systemd-check: no systemd-nspawn"; exit 1; }
  exec unshare --mount --propagation private "$0" "$debs" --in-namespace
fi
files=()
for d in braid-nccl-plugins braid-tools braid-ps; do files+=("$(ls "$debs/${d}"_*.deb | head -n 1)"); done
lower=$(test/pkg/deb_root.sh "${files[@]}") || exit 1
work=$(mktemp -d)
trap 'umount -R "$work/root" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/upper" "$work/ovl" "$work/root"
root=$work/root
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$work/upper,workdir=$work/ovl" "$root" || exit 1
mkdir -p "$root/tmp/debs" && cp "${files[@]}" "$root/tmp/debs/"
mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev"
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive apt-get install -y \
  $(for f in "${files[@]}"; do echo "/tmp/debs/$(basename "$f")"; done) >"$work/install.log" 2>&1 ||
  { tail "$work/install.log"; exit 1; }
umount "$root/dev" "$root/proc"

cat >"$root/root/probe.sh" <<'PROBE'
#!/bin/sh
# Runs once the container has booted; writes /root/probe.out, then powers the container off.
{
echo "no-token: $(systemctl show braid-ps -p ActiveState --value) $(systemctl show braid-ps -p ConditionResult)"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | install -o braid-ps -g braid-ps -m 600 /dev/stdin /etc/braid/braid-ps.token
systemctl start braid-ps; sleep 1
echo "started: $(systemctl is-active braid-ps)"
env NCCL_NET_PLUGIN=braid BRAID_SOCKET_IFNAME=lo BRAID_PS_SERVERS=127.0.0.1:9555 \
  BRAID_PS_TOKEN="$(cat /etc/braid/braid-ps.token)" \
  braid-perf allreduce --algo collnet -n 3 -b 4 -e 4M -f 16 --iters 2 -w 1 >/root/perf.out 2>&1
echo "collnet: rc=$?"
sleep 1
journalctl -u braid-ps --no-pager -o cat | grep -o 'closed: 3 ranks (3 joined).*' | sed 's/^/journal: /'
kill -KILL "$(systemctl show -p MainPID --value braid-ps)"; sleep 4
echo "after-crash: $(systemctl is-active braid-ps) $(systemctl show braid-ps -p NRestarts)"
systemctl stop braid-ps
echo "stopped: $(systemctl show braid-ps -p Result) $(systemctl show braid-ps -p ExecMainStatus)"
echo "security: $(systemd-analyze security braid-ps --no-pager | tail -n 1)"
} >/root/probe.out 2>&1
systemctl poweroff
PROBE
chmod +x "$root/root/probe.sh"
printf '[Unit]\nAfter=multi-user.target\n[Service]\nType=oneshot\nExecStart=/root/probe.sh\n[Install]\nWantedBy=multi-user.target\n' \
  >"$root/etc/systemd/system/braid-probe.service"
ln -s /etc/systemd/system/braid-probe.service "$root/etc/systemd/system/multi-user.target.wants/braid-probe.service"
# --register=no --keep-unit: no machined or system bus needed on the host.
timeout 180 systemd-nspawn -q -D "$root" --boot --private-network --register=no --keep-unit \
  </dev/null >"$work/boot.log" 2>&1
out=$(cat "$root/root/probe.out" 2>/dev/null)
[ -n "$out" ] || { echo "systemd-check: the probe did not run; the boot's log:"; tail -n 30 "$work/boot.log"; exit 1; }
echo "$out"
pass=0 fail=0
check() { if grep -qE "$2" <<<"$out"; then pass=$((pass + 1)); echo "ok   $1"; else fail=$((fail + 1)); echo "FAIL $1"; fi; }
check "no token: skipped by its condition" '^no-token: inactive ConditionResult=no$'
check "started under systemd with every hardening option" '^started: active$'
check "CollNet allreduce against it" '^collnet: rc=0$'
check "the session in the journal" '^journal: closed: 3 ranks \(3 joined\)'
check "restarted after SIGKILL" '^after-crash: active NRestarts=1$'
check "systemctl stop: status 0" '^stopped: Result=success ExecMainStatus=0$'
echo "systemd-check: $pass passed, $fail failed"
[ "$fail" = 0 ]
