# Sourced by the guest tests (test/vm/*.sh), from the repository root:
#   vm_image             builds or reuses the cached image ($cache); sets $build_note; skips
#                        (prints "vm: skipped (REASON)", exits 77) where no guest can be booted
#   vm_share FILE...     a temporary share holding only FILEs (removed at exit), in $share
#   vm_share_built NAME  builds $build/NAME on the host (make) and shares only it
#   vm_run NAME SCRIPT   boots the guest, runs the bash SCRIPT inside with $share mounted, and
#                        reports "vm: NAME passed (S s)" or fails
# With VM_BATCH=DIR and VM_BATCH_NAME=NAME (test/vm/all.sh: one boot for every guest test),
# vm_image does nothing (all.sh did it), vm_share puts the files in DIR/NAME/ and vm_run writes
# SCRIPT and its timeout there instead of booting.
cache=${BRAID_VM_CACHE:-/var/cache/braid-vm}
build=${BUILD:-build}
skip() { echo "vm: skipped ($*)"; exit 77; } # 77: test/run.sh reports SKIP
now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }
secs() { printf '%d.%d' $(($1 / 1000000)) $(($1 % 1000000 / 100000)); }

vm_image() {
  local t0 rc=0
  if [ -n "${VM_BATCH:-}" ]; then build_note="checked by test/vm/all.sh"; return 0; fi
  t0=$(now_us)
  if tools/vm/build-image.sh --check "$cache"; then
    build_note="cached"
  elif [ "$(id -u)" != 0 ]; then
    skip "not root: cannot install packages or build the image in $cache"
  else
    tools/vm/build-image.sh "$cache" || rc=$?
    case $rc in
      0) build_note="built in $(secs $(($(now_us) - t0))) s";;
      3) skip "packages or the Debian mirror unavailable; see the messages above";;
      *) echo "vm: FAIL: building the image failed (exit $rc)" >&2; exit 1;;
    esac
  fi
  command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
  command -v cpio >/dev/null || skip "cpio not installed"
}

vm_share() {
  if [ -n "${VM_BATCH:-}" ]; then
    share=$VM_BATCH/$VM_BATCH_NAME
    mkdir -p "$share"
    [ $# -eq 0 ] || cp "$@" "$share/"
    return 0
  fi
  share=$(mktemp -d "${TMPDIR:-/tmp}/braid-vm-share.XXXXXX")
  trap 'rm -rf "$share"' EXIT
  [ $# -eq 0 ] || cp "$@" "$share/"
}

vm_share_built() {
  make -s BUILD="$build" "$build/$1" >&2 || { echo "vm: FAIL: cannot build $build/$1" >&2; exit 1; }
  vm_share "$build/$1"
}

vm_run() {
  local name=$1 script=$2 t0 took rc=0
  if [ -n "${VM_BATCH:-}" ]; then
    printf '%s\n' "$script" >"$share/test.sh"
    echo "${VM_TIMEOUT:-180}" >"$share/timeout"
    return 0
  fi
  t0=$(now_us)
  tools/vm/run.sh --cache "$cache" --share "$share" --timeout "${VM_TIMEOUT:-180}" -- bash -c "$script" || rc=$?
  took=$(secs $(($(now_us) - t0)))
  if [ "$rc" -ne 0 ]; then
    echo "vm: FAIL: $name in the guest exited $rc (${took} s)"
    exit 1
  fi
  echo "vm: $name passed (${took} s; image: $build_note)"
}
