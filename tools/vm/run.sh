#!/usr/bin/env bash
# Boots braid's cached test guest (tools/vm/build-image.sh) under qemu, runs one command in it
# as root after /init has set up the soft-RoCE fabric, prints the serial console, powers the
# guest off and exits with the command's exit status.
#
#   run.sh [options] -- COMMAND [ARG...]
#     --share DIR     host directory mounted read-only at /host in the guest, the command's
#                     working directory (default: the repository root); 9p, or packed into
#                     the initramfs where qemu or the guest kernel lacks 9p (.git left out)
#     --mem MB        guest memory (default 1024; the root lives in RAM)
#     --cpus N        guest CPUs (default 2)
#     --rails N       veth pairs with rxe devices (default 4): see tools/vm/guest-setup.sh
#     --timeout S     kill qemu after S seconds, boot included (default 120); exit 124
#     --accel A       auto (default: KVM if a probe boot under it works, else TCG), kvm, tcg
#     --env NAME=VAL  export NAME=VAL to the command (repeatable)
#     --cache DIR     image cache (default /var/cache/braid-vm, or $BRAID_VM_CACHE)
# Environment: BRAID_VM_ACCEL (as --accel), BRAID_VM_SHARE_MODE (auto, 9p or cpio).
#
# COMMAND and its arguments are run as given (quoted), not through a shell: use
# `-- bash -c '...'` for pipelines. The guest has no network device to the outside.
# Exit status: COMMAND's; 124 timeout; 125 the guest failed (no status, fabric set-up failed);
# 2 usage; 1 other errors (no qemu, no image and cannot build it).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
share=$(cd "$here/../.." && pwd)
mem=1024 cpus=2 rails=4 timeout_s=120
accel=${BRAID_VM_ACCEL:-auto}
cache=${BRAID_VM_CACHE:-/var/cache/braid-vm}
envs=()

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
die() { echo "vm: error: $*" >&2; exit 1; }
int() { [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || { echo "vm: $1 needs a positive integer, not '$2'" >&2; exit 2; }; }

while [ $# -gt 0 ]; do
  case $1 in
    --share) share=${2:?--share needs a directory}; shift 2;;
    --mem) int "$1" "${2:-}"; mem=$2; shift 2;;
    --cpus) int "$1" "${2:-}"; cpus=$2; shift 2;;
    --rails) int "$1" "${2:-}"; rails=$2; shift 2;;
    --timeout) int "$1" "${2:-}"; timeout_s=$2; shift 2;;
    --accel) accel=${2:-}; shift 2;;
    --env) [[ ${2:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || { echo "vm: --env needs NAME=VALUE" >&2; exit 2; }
           envs+=("$2"); shift 2;;
    --cache) cache=${2:?--cache needs a directory}; shift 2;;
    --) shift; break;;
    -h|--help) usage;;
    *) echo "vm: unknown option '$1'" >&2; usage;;
  esac
done
[ $# -gt 0 ] || { echo "vm: no COMMAND given" >&2; usage; }
case $accel in auto|kvm|tcg) ;; *) echo "vm: --accel must be auto, kvm or tcg" >&2; exit 2;; esac
[ -d "$share" ] || die "share directory '$share' does not exist"
share=$(cd "$share" && pwd)
qemu=$(command -v qemu-system-x86_64) || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86, or run tools/vm/build-image.sh as root)"
command -v cpio >/dev/null || die "cpio not found (apt-get install cpio)"

# The image: build it if it is missing or stale (a no-op when it is up to date).
"$here/build-image.sh" "$cache" >&2 || die "no usable image in $cache (tools/vm/build-image.sh failed)"
# shellcheck disable=SC1091
. "$cache/image.env"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-vm.XXXXXX")
bg=
cleanup() {
  if [ -n "$bg" ]; then
    if [ -s "$tmp/timeout.pid" ]; then kill "$(cat "$tmp/timeout.pid")" 2>/dev/null || true; fi
    wait "$bg" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }
secs() { printf '%d.%d' $(($1 / 1000000)) $(($1 % 1000000 / 100000)); }

# boot ACCEL TIMEOUT INITRD APPEND LOG|- [qemu args...]: the console goes through the filter
# below (to stdout, or to LOG); sets boot_status ("EXIT N", "SETUP-FAILED" or ""), boot_rc
# (qemu's or timeout's status), t_init_us and t_fabric_us (0 when not seen).
boot() {
  local acc=$1 tmo=$2 initrd=$3 append=$4 log=$5; shift 5
  local cpu=max accel_opt="tcg,thread=multi" bios=()
  [ "$acc" = kvm ] && cpu=host accel_opt=kvm
  # qboot (a minimal firmware that only boots -kernel) starts faster than SeaBIOS, and prints
  # nothing on the console.
  for f in /usr/share/qemu/qboot.rom /usr/share/qemu/bios/qboot.rom; do
    if [ -f "$f" ]; then bios=(-bios "$f"); break; fi
  done
  local fifo=$tmp/console status=$tmp/status
  rm -f "$fifo" "$status" "$tmp/timeout.pid"; mkfifo "$fifo"; : >"$status"
  local t0; t0=$(now_us)
  # timeout runs in the background of a { } group, so that a shell's "Aborted"-style report of
  # its end goes to qemu.err; its pid is kept so that cleanup can stop it (and so qemu).
  { timeout --kill-after=5 "$tmo" "$qemu" -nodefaults -nographic -no-reboot \
    -machine pc -accel "$accel_opt" -cpu "$cpu" -smp "$cpus" -m "$mem" \
    -kernel "$cache/${BRAID_VM_KERNEL:-vmlinuz}" -initrd "$initrd" -append "$append" \
    "${bios[@]}" -monitor none -serial stdio -serial "file:$status" "$@" \
    </dev/null >"$fifo" &
    echo $! >"$tmp/timeout.pid"; wait $!; } 2>"$tmp/qemu.err" &
  bg=$!
  local line console_status=
  t_init_us=0 t_fabric_us=0
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line//$'\r'/}
    case $line in
      *"braid-vm: init started"*) t_init_us=$(($(now_us) - t0));;
      *"braid-vm: fabric ready"*) t_fabric_us=$(($(now_us) - t0));;
      *"braid-vm: EXIT "*|*"braid-vm: SETUP-FAILED"*) console_status=${line##*braid-vm: };;
    esac
    if [ "$log" = - ]; then printf '%s\n' "$line"; else printf '%s\n' "$line" >>"$log"; fi
  done <"$fifo"
  boot_rc=0; wait "$bg" || boot_rc=$?
  bg=
  t_total_us=$(($(now_us) - t0))
  boot_status=$(tr -d '\r' <"$status" | grep -a -o 'BRAID-VM-[A-Z-]*\( [0-9]*\)\{0,1\}' | tail -n 1 || true)
  boot_status=${boot_status#BRAID-VM-}
  [ -n "$boot_status" ] || boot_status=$console_status
}

# ---- accelerator: KVM only if it actually boots this kernel -------------------------------
kvm_usable() { [ -r /dev/kvm ] && [ -w /dev/kvm ]; }
if [ "$accel" = auto ]; then
  accel=tcg
  if kvm_usable; then
    key="$(uname -r) $BRAID_VM_HASH $("$qemu" --version | head -n 1)"
    probe=$cache/kvm-probe
    if [ -f "$probe" ] && [ "$(head -n 1 "$probe")" = "$key" ]; then
      [ "$(sed -n 2p "$probe")" = ok ] && accel=kvm
    else
      echo "vm: probing whether KVM can boot the guest (once; cached in $probe)" >&2
      boot kvm 30 "$cache/initrd.img" "console=ttyS0 quiet loglevel=3 panic=-1 braid.probe=1" "$tmp/probe.log"
      result=bad why=
      if [ "$boot_status" = "EXIT 0" ]; then result=ok accel=kvm
      elif [ -s "$tmp/qemu.err" ]; then why=": $(grep -v '^qemu-system-x86_64: terminating' "$tmp/qemu.err" | head -n 2 | tr '\n' ' ')"
      else why=": no status from the guest"; fi
      echo "vm: KVM probe: $result after $(secs "$t_total_us") s$why; using ${accel^^}" >&2
      printf '%s\n%s\n' "$key" "$result" >"$probe" 2>/dev/null || true
    fi
  fi
elif [ "$accel" = kvm ] && ! kvm_usable; then
  die "--accel kvm: /dev/kvm is not usable by this user"
fi

# ---- the command (and, without 9p, the share) go in an uncompressed cpio before the image --
share_mode=${BRAID_VM_SHARE_MODE:-auto}
case $share_mode in
  auto)
    share_mode=9p
    if [ "${BRAID_VM_9P:-0}" != 1 ] || ! "$qemu" -device help 2>/dev/null | grep -q '"virtio-9p-pci"'; then
      share_mode=cpio
    fi;;
  9p|cpio) ;;
  *) die "BRAID_VM_SHARE_MODE must be auto, 9p or cpio";;
esac
mkdir -p "$tmp/pre/braid"
{
  echo '#!/bin/bash'
  printf '%q ' "$@"
  echo
} >"$tmp/pre/braid/cmd"
: >"$tmp/pre/braid/env"
for e in "${envs[@]}"; do printf 'export %q\n' "$e" >>"$tmp/pre/braid/env"; done
qemu_extra=()
if [ "$share_mode" = 9p ]; then
  qemu_extra+=(-virtfs "local,path=$share,mount_tag=braidshare,security_model=none,readonly=on")
else
  echo "vm: packing $share (without .git) into the initramfs (no 9p)" >&2
  mkdir -p "$tmp/pre/host"
  tar -C "$share" --exclude=./.git -cf - . | tar -C "$tmp/pre/host" -xf -
fi
(cd "$tmp/pre" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$tmp/initrd"
cat "$cache/initrd.img" >>"$tmp/initrd"
rm -rf "$tmp/pre"

append="console=ttyS0 quiet loglevel=3 panic=-1 braid.rails=$rails braid.share=$share_mode"
shown="$*"; shown=${shown%%$'\n'*}; [ ${#shown} -le 100 ] || shown="${shown:0:100}"
[ "$shown" = "$*" ] || shown="$shown ..."
echo "vm: booting kernel $BRAID_VM_KVER ($accel, $cpus cpus, $mem MiB, $rails rails, timeout ${timeout_s}s): $shown" >&2
boot "$accel" "$timeout_s" "$tmp/initrd" "$append" - "${qemu_extra[@]}"

times="init after $(secs "$t_init_us") s, fabric after $(secs "$t_fabric_us") s, total $(secs "$t_total_us") s"
case $boot_status in
  "EXIT "*)
    rc=${boot_status#EXIT }
    echo "vm: command exited with status $rc ($times)" >&2
    exit "$rc";;
  SETUP-FAILED)
    echo "vm: the guest's set-up (share or fabric) failed ($times)" >&2
    exit 125;;
esac
if [ "$boot_rc" = 124 ] || [ "$boot_rc" = 137 ]; then
  echo "vm: timed out after ${timeout_s}s; qemu killed ($times)" >&2
  exit 124
fi
echo "vm: the guest ended without reporting a status (qemu exit $boot_rc; $times)" >&2
if [ -s "$tmp/qemu.err" ]; then sed 's/^/vm: qemu: /' "$tmp/qemu.err" >&2; fi
exit 125
