#!/usr/bin/env bash
# What installing and purging packages left in a root (test/pkg/in_root.sh):
#   leftovers.sh list ROOT            every file, folder and link of ROOT but the mount points'
#                                     contents (/proc /sys /dev /tmp /run): type, mode, owner,
#                                     size (not a folder's), link target, MD5 of each file's data
#   leftovers.sh compare WORK ROOT    WORK/before against WORK/after (two lists); exit 1 with the
#                                     differences, 0 with a summary line
# Not compared, as any apt-get run changes them whatever it installs (each named with why):
IGNORED=(
  '^\./var/log/'                        # apt's and dpkg's logs of the install and the purge
  '^\./var/cache/apt/'                  # apt's package cache, rebuilt by every apt-get run
  '^\./var/cache/ldconfig/aux-cache[[:space:]]'  # ldconfig's cache of file times, rewritten by every run
  '^\./var/lib/dpkg/lock(-frontend)?[[:space:]]'  # dpkg's and apt's empty lock files
  '^\./var/lib/dpkg/triggers/'          # pending-trigger bookkeeping (ldconfig, man-db)
  '^\./var/lib/dpkg/status-old[[:space:]]' # dpkg's copy of its previous status file
  '^\./var/lib/apt/lists/'              # apt's lists (empty here), where it notes local .deb files
  '^\./var/lib/apt/extended_states[[:space:]]' # apt's automatically-installed marks (checked below)
)
# dpkg's database itself (status, available, info/) is compared: after the purge it must hold
# exactly what it held before; apt's marks must name no braid package.  /etc/passwd, group, shadow and gshadow must differ
# by exactly one line, the braid-ps user's or group's (Debian leaves a package's system user on
# purge: files it owned may remain, and a reused id would own them), and their "-" backups, which
# the user tools write, must be the files as they were before.
set -euo pipefail

list() {
  cd "$1"
  find . \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp -o -path ./run \) -prune -o \
    -printf '%p\t%y %m %U:%G %s %l\n' | awk -F'\t' -v OFS='\t' '{ if ($2 ~ /^d /) sub(/ [0-9]+ $/, " - ", $2); print }'
  find . \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp -o -path ./run \) -prune -o \
    -type f -print0 | xargs -0 md5sum | awk '{ h = $1; sub(/^[0-9a-f]+  /, ""); print $0 "\tmd5 " h }'
}

compare() {
  local work=$1 root=$2 bad=0 pat
  pat=$(IFS='|'; echo "${IGNORED[*]}")
  local users='^\./etc/(passwd|group|shadow|gshadow)-?[[:space:]]'
  if ! diff <(grep -Ev "$pat|$users" "$work/before" | LC_ALL=C sort) \
            <(grep -Ev "$pat|$users" "$work/after" | LC_ALL=C sort) >"$work/diff"; then
    echo "changed by install + purge (< before, > after):"
    cat "$work/diff"
    bad=1
  fi
  if grep -q '^Package: braid' "$root/var/lib/apt/extended_states" 2>/dev/null; then
    echo "/var/lib/apt/extended_states still names a braid package"; bad=1
  fi
  for f in passwd group shadow gshadow; do
    added=$(diff "$work/before.$f" "$root/etc/$f" | grep -v '^[0-9]' || true)
    if ! [[ $added =~ ^\>\ braid-ps: ]] || [ "$(grep -c . <<<"$added")" != 1 ]; then
      echo "/etc/$f: not exactly the braid-ps line added:"; echo "$added"; bad=1
    fi
    if [ -e "$root/etc/$f-" ] && ! cmp -s "$work/before.$f" "$root/etc/$f-"; then
      echo "/etc/$f-: not the file as it was before"; bad=1
    fi
  done
  [ $bad = 0 ] || return 1
  echo "$(cut -f1 "$work/after" | sort -u | wc -l) files, folders and links as before, but for the braid-ps user and group (kept, as Debian does)"
}

case ${1:-} in
  list) list "$2" ;;
  compare) compare "$2" "$3" ;;
  *) echo "usage: leftovers.sh list ROOT | compare WORK ROOT" >&2; exit 2 ;;
esac
