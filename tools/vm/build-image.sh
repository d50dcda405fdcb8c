#!/usr/bin/env bash
# Builds, once, the cached Debian guest that tools/vm/run.sh boots: a debootstrap minbase
# bookworm root with rdma-core and the runtime libraries braid's binaries need, the host's
# Debian kernel (linux-image-amd64) and the few modules the soft-RoCE test fabric needs, packed
# as one compressed initramfs whose /init sets the fabric up and runs a command.
#
#   build-image.sh [CACHE_DIR]       build if missing or stale (default /var/cache/braid-vm)
#   build-image.sh --check [DIR]     exit 0 if the cached image is up to date, 1 if not
#
# The image is rebuilt only when the content hash of this script and of guest-setup.sh changes
# (the debootstrap root is cached separately, keyed by suite, mirror and package list, so
# editing /init or the module list repacks in seconds without downloading again).
# As root, missing host packages are installed with apt-get; otherwise the exact apt-get line is
# printed and the script exits 1. Exit 3: a prerequisite could not be had (apt-get or the
# Debian mirror failed) -- callers such as test/vm/smoke.sh treat that as "skip".
#
# Environment: BRAID_VM_MIRROR (default http://deb.debian.org/debian), BRAID_VM_SUITE
# (default bookworm), BRAID_VM_KVER (a Debian kernel version installed on the host, default:
# the one linux-image-amd64 depends on).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check_only=0
if [ "${1:-}" = --check ]; then check_only=1; shift; fi
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;; esac
cache=${1:-${BRAID_VM_CACHE:-/var/cache/braid-vm}}
suite=${BRAID_VM_SUITE:-bookworm}
mirror=${BRAID_VM_MIRROR:-http://deb.debian.org/debian}

die() { echo "build-image: error: $*" >&2; exit 1; }
unavailable() { echo "build-image: unavailable: $*" >&2; exit 3; }
log() { echo "build-image: $*" >&2; }

[ -f "$here/guest-setup.sh" ] || die "missing $here/guest-setup.sh"
hash=$(cat "$0" "$here/guest-setup.sh" | sha256sum | cut -c1-16)

up_to_date() {
  [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$hash" ] &&
    [ -s "$cache/vmlinuz" ] && [ -s "$cache/initrd.img" ] && [ -s "$cache/image.env" ]
}
if [ "$check_only" = 1 ]; then up_to_date; exit; fi
if up_to_date; then log "image in $cache is up to date ($hash)"; exit 0; fi

# ---- host packages --------------------------------------------------------------------------
host_pkgs=(qemu-system-x86 debootstrap linux-image-amd64 cpio zstd xz-utils kmod iproute2)
missing=()
for p in "${host_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "build-image: missing packages. Install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  log "installing host packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || unavailable "apt-get update failed"
  # INITRD=No: the host never boots this kernel, so skip building an initramfs for it.
  INITRD=No apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    unavailable "apt-get install ${missing[*]} failed"
fi
[ "$(id -u)" = 0 ] || die "building the image needs root (debootstrap, reading /boot/vmlinuz-*)"

# ---- kernel ---------------------------------------------------------------------------------
kver=${BRAID_VM_KVER:-}
if [ -z "$kver" ]; then
  dep=$(dpkg-query -W -f='${Depends}' linux-image-amd64) || die "linux-image-amd64 is not installed"
  kver=$(sed -n 's/^linux-image-\([^ ,]*\).*/\1/p' <<<"$dep")
  [ -n "$kver" ] || die "cannot tell the kernel version from linux-image-amd64's Depends: $dep"
fi
vmlinuz=/boot/vmlinuz-$kver
moddir=/lib/modules/$kver
[ -f "$vmlinuz" ] || die "$vmlinuz not found (is linux-image-$kver installed?)"
[ -f "$moddir/modules.dep" ] || die "$moddir/modules.dep not found"
compress=(zstd -q -T0 -9 -c) comp=zstd
if [ -f "/boot/config-$kver" ] && ! grep -q '^CONFIG_RD_ZSTD=y' "/boot/config-$kver"; then
  compress=(gzip -6 -c) comp=gzip
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if up_to_date; then log "image in $cache is up to date ($hash)"; exit 0; fi
t_start=$SECONDS

# ---- debootstrap root (cached by its own key) -----------------------------------------------
guest_pkgs=(rdma-core ibverbs-providers ibverbs-utils rdmacm-utils iproute2 kmod
  libfabric1 libhwloc15 libsodium23 libstdc++6 procps iputils-ping)
# perftest (ib_write_bw and friends) is in bookworm's main; include it where the archive has it.
if apt-cache show perftest >/dev/null 2>&1; then guest_pkgs+=(perftest); else
  log "perftest not in the host's apt lists; building without it"; fi
root_key=$(printf '%s\n' "$suite" "$mirror" "${guest_pkgs[@]}" | sha256sum | cut -c1-16)
root=$cache/rootfs-$root_key
if [ ! -f "$root/.complete" ]; then
  rm -rf "$root" "$root.tmp"
  for old in "$cache"/rootfs-*; do [ -e "$old" ] && rm -rf "$old"; done
  log "debootstrap --variant=minbase $suite ($mirror) with: ${guest_pkgs[*]}"
  t0=$SECONDS
  if ! debootstrap --variant=minbase --include="$(IFS=,; echo "${guest_pkgs[*]}")" \
      "$suite" "$root.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1; then
    tail -n 20 "$cache/debootstrap.log" >&2
    for m in proc sys dev/pts dev; do umount "$root.tmp/$m" 2>/dev/null || true; done
    unavailable "debootstrap failed (log: $cache/debootstrap.log)"
  fi
  # Slim it: the guest only runs tests, from RAM.
  rm -rf "$root.tmp"/usr/share/{doc,man,info,locale,lintian,bug} "$root.tmp"/var/lib/apt/lists/* \
    "$root.tmp"/var/cache/apt/* "$root.tmp"/var/cache/debconf/*-old "$root.tmp"/var/log/*
  mkdir -p "$root.tmp"/usr/share/locale
  touch "$root.tmp/.complete"
  mv "$root.tmp" "$root"
  log "root filesystem ready in $((SECONDS - t0)) s ($(du -sh "$root" | cut -f1))"
fi

# ---- overlay: modules, /init, the fabric helper (packed after the root, so it wins) ---------
stage=$cache/.overlay
rm -rf "$stage"
mkdir -p "$stage"
put() { mkdir -p "$(dirname "$stage/$1")"; cat >"$stage/$1"; chmod "$2" "$stage/$1"; }

modules=(rdma_rxe ib_uverbs rdma_ucm ib_umad crc32_generic crc32-pclmul crc32c_generic
  veth sch_netem sch_tbf sch_prio sch_htb cls_u32 cls_matchall act_gact
  virtio_pci virtio_console 9p 9pnet_virtio af_packet)
log "kernel $kver: copying modules ${modules[*]} and their dependencies"
# The guest root is merged-/usr (/lib -> usr/lib): put modules in usr/lib/modules, never a
# directory named lib (the kernel would replace the root's /lib symlink with it).
gmod=$stage/usr/lib/modules/$kver
mkdir -p "$gmod"
missing_mods=()
for m in "${modules[@]}"; do
  if ! deps=$(modprobe -S "$kver" --show-depends "$m" 2>/dev/null); then missing_mods+=("$m"); continue; fi
  while read -r kind path _; do
    [ "$kind" = insmod ] || continue
    rel=${path#/usr}; rel=${rel#"$moddir"/}
    case $rel in /*) die "module $path is not under $moddir";; esac
    mkdir -p "$(dirname "$gmod/$rel")"
    cp "$path" "$gmod/$rel"
  done <<<"$deps"
done
[ ${#missing_mods[@]} -eq 0 ] || log "not in $kver (skipped): ${missing_mods[*]}"
for req in rdma_rxe ib_uverbs crc32_generic veth sch_netem; do
  if printf '%s\n' "${missing_mods[@]}" | grep -qx "$req"; then die "kernel $kver has no module $req"; fi
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
  if [ -f "$moddir/$f" ]; then cp "$moddir/$f" "$gmod/"; fi
done
ln -s usr/lib "$stage/lib"          # for depmod -b only
depmod -b "$stage" "$kver"
rm "$stage/lib"
ninep=0
[ -n "$(find "$gmod" -name '9pnet_virtio.ko*' | head -1)" ] && ninep=1

put usr/local/sbin/braid-fabric 0755 <"$here/guest-setup.sh"
put etc/hostname 0644 <<<"braid-vm"
put etc/hosts 0644 <<'EOF'
127.0.0.1 localhost braid-vm
::1 localhost ip6-localhost ip6-loopback
EOF
put etc/braid-vm-release 0644 <<EOF
BRAID_VM_HASH=$hash
BRAID_VM_KVER=$kver
BRAID_VM_SUITE=$suite
EOF
put init 0755 <<'INIT'
#!/bin/bash
# /init of braid's test guest (written by tools/vm/build-image.sh). Runs as PID 1 from the
# initramfs: mounts the pseudo file systems, mounts the host share read-only at /host, sets up
# the soft-RoCE fabric (braid-fabric setup), runs /braid/cmd, reports its exit status on the
# second serial port (and as a marker line on the console) and powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || true
mkdir -p /dev/pts /dev/shm /run /tmp /host
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
exec </dev/null >/dev/console 2>&1
stty -F /dev/console -onlcr 2>/dev/null || true
echo braid-vm >/proc/sys/kernel/hostname
read -r up _ </proc/uptime
echo "braid-vm: init started at ${up}s"

arg() { local a; for a in $(cat /proc/cmdline); do case $a in "$1="*) echo "${a#*=}"; return;; esac; done; echo "$2"; }
report() { # the status line run.sh waits for
  echo "braid-vm: $1"
  echo "BRAID-VM-$1" >/dev/ttyS1 2>/dev/null || true
  sync
  sleep 0.3
  echo o >/proc/sysrq-trigger
  sleep 30
}

if [ "$(arg braid.probe 0)" = 1 ]; then report "EXIT 0"; fi

case $(arg braid.share none) in
  9p)
    modprobe -q -a virtio_pci 9pnet_virtio 9p || true
    if mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 braidshare /host; then :; else
      echo "braid-vm: cannot mount the 9p share"; report "SETUP-FAILED"; fi;;
  cpio) mount --bind /host /host && mount -o remount,bind,ro /host || true;;
esac

if ! braid-fabric setup "$(arg braid.rails 4)"; then report "SETUP-FAILED"; fi
read -r up _ </proc/uptime
echo "braid-vm: fabric ready ($(arg braid.rails 4) rails) at ${up}s"

export BRAID_VM_SHARE=/host BRAID_VM_RAILS=$(arg braid.rails 4)
[ -f /braid/env ] && . /braid/env
if [ -f /braid/cmd ]; then
  ( cd /host 2>/dev/null || cd /; exec bash /braid/cmd ) </dev/null
  rc=$?
else
  echo "braid-vm: no command"; rc=0
fi
report "EXIT $rc"
INIT

log "packing the initramfs ($comp)"
tmp_img=$cache/.initrd.img.tmp
# Two cpio archives in one compressed stream: the kernel unpacks them in order (cpio pads each
# to 512 bytes, which the kernel skips), so the overlay's /etc/hostname replaces the root's.
# Left out of the guest (unpacking is most of the boot under TCG): udev's hardware database
# (no udev runs), iconv's charset modules, time zones, dpkg's database.
slim=(./usr/lib/udev/hwdb.bin ./usr/lib/udev/hwdb.d ./usr/lib/x86_64-linux-gnu/gconv
  ./usr/share/zoneinfo ./usr/share/misc/pci.ids ./var/lib/dpkg/info ./var/cache/debconf)
prune=(); for p in "${slim[@]}"; do prune+=(-path "$p" -prune -o); done
{ (cd "$root" && find . -mindepth 1 "${prune[@]}" ! -name .complete -print | LC_ALL=C sort |
     cpio -o -H newc --quiet)
  (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet)
} | "${compress[@]}" >"$tmp_img"
rm -rf "$stage"
chmod 0644 "$tmp_img"

# ---- the kernel qemu loads ------------------------------------------------------------------
# Under TCG the bzImage's own decompressor takes seconds at every boot. The kernel has a PVH
# entry (CONFIG_PVH), so qemu can start the uncompressed vmlinux directly: extract it once.
extract_vmlinux() { # bzImage out: 0 if out is the ELF vmlinux
  local magic dec off
  for spec in $'\xfd7zXZ|xz -dc' $'\x28\xb5\x2f\xfd|zstd -dcq' $'\x1f\x8b\x08|gzip -dc'; do
    magic=${spec%%|*} dec=${spec#*|}
    for off in $(LC_ALL=C grep -abo -F "$magic" "$1" | cut -d: -f1 | head -n 5); do
      tail -c +$((off + 1)) "$1" | $dec >"$2" 2>/dev/null || true
      [ "$(head -c 4 "$2" | od -An -c | tr -d ' ')" = '177ELF' ] && return 0
    done
  done
  rm -f "$2"; return 1
}
boots() { # kernel: 0 if it boots the new initramfs to /init under TCG and reports back
  timeout 120 qemu-system-x86_64 -nodefaults -nographic -no-reboot -machine pc -accel tcg \
    -cpu max -m 1024 -kernel "$1" -initrd "$tmp_img" -monitor none -serial stdio \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 braid.probe=1" </dev/null \
    >"$cache/boot-check.log" 2>&1 || true
  tr -d '\r' <"$cache/boot-check.log" | grep -q 'braid-vm: EXIT 0'
}
install -m 0644 "$vmlinuz" "$cache/.vmlinuz.tmp"
kernel=vmlinuz
if extract_vmlinux "$cache/.vmlinuz.tmp" "$cache/.vmlinux.tmp"; then
  chmod 0644 "$cache/.vmlinux.tmp"
  log "checking that qemu boots the uncompressed vmlinux (PVH)"
  if boots "$cache/.vmlinux.tmp"; then kernel=vmlinux; else
    log "the vmlinux did not boot; using the bzImage"; rm -f "$cache/.vmlinux.tmp"; fi
fi
if [ "$kernel" = vmlinuz ]; then
  log "checking that qemu boots the bzImage"
  boots "$cache/.vmlinuz.tmp" || die "the new image does not boot under qemu (TCG): see $cache/boot-check.log"
fi
cat >"$cache/.image.env.tmp" <<EOF
BRAID_VM_HASH=$hash
BRAID_VM_KVER=$kver
BRAID_VM_KERNEL=$kernel
BRAID_VM_COMPRESSION=$comp
BRAID_VM_9P=$ninep
BRAID_VM_BUILT="$(date -u '+%Y-%m-%dT%H:%M:%SZ')"
EOF
mv "$cache/.vmlinuz.tmp" "$cache/vmlinuz"
if [ "$kernel" = vmlinux ]; then mv "$cache/.vmlinux.tmp" "$cache/vmlinux"; else rm -f "$cache/vmlinux"; fi
mv "$tmp_img" "$cache/initrd.img"
mv "$cache/.image.env.tmp" "$cache/image.env"
rm -f "$cache"/kvm-probe
echo "$hash" >"$cache/stamp"
chmod 0755 "$cache"
log "image ready in $cache: kernel $kver ($kernel), initrd $(du -h "$cache/initrd.img" | cut -f1), built in $((SECONDS - t_start)) s"
