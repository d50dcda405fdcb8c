#!/usr/bin/env bash
# Whether this machine gives a test the namespaces it needs, for a suite's skip line:
#   test/ns_check.sh UNSHARE_OPTION...        e.g. --mount --propagation private
# runs `unshare UNSHARE_OPTION... true`: exit 0, nothing printed, when that works; otherwise
# prints why in one line (unshare's error and the limit behind it, where known) and exits 1.
# The limits recognised:
#   EINVAL where "/" is not a mount point (a chroot entered without `mount --bind ROOT ROOT`
#          first): no mount namespace can make its mounts private or slave, so neither
#          `unshare --mount` nor `ip netns exec` works;
#   EPERM  in a container that does not allow it (no CAP_SYS_ADMIN, or seccomp refusing
#          unshare), or, not root, where unprivileged user namespaces are off.
# Only the environment is probed (the command is `true`): a suite that skips on this has not
# run any of braid.
set -uo pipefail
command -v unshare >/dev/null || { echo "unshare not found (util-linux)"; exit 1; }
err=$(unshare "$@" true 2>&1) && exit 0
err=$(head -n 1 <<<"$err")
why=${err:-"unshare $* failed"}
root_mounted() { awk '$5 == "/" { f = 1 } END { exit !f }' /proc/self/mountinfo; }
if [[ $err == *"Invalid argument"* ]] && [ -r /proc/self/mountinfo ] && ! root_mounted; then
  why+="; / is not a mount point (a chroot: mount --bind ROOT ROOT before entering it)"
elif [[ $err == *"Operation not permitted"* ]]; then
  if [ "$(id -u)" = 0 ]; then
    why+="; not allowed here (a container needs CAP_SYS_ADMIN and no seccomp filter on unshare)"
  else
    why+="; not root, and unprivileged user namespaces are off"
  fi
fi
echo "$why"
exit 1
