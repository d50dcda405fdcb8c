#!/usr/bin/env bash
# The soft-RoCE test fabric inside braid's test guest; installed there as
# /usr/local/sbin/braid-fabric (tools/vm/build-image.sh copies it in, /init runs `setup`).
#
#   braid-fabric setup [RAILS]        modules, sysctls, RAILS (default 4) veth pairs with an rxe
#                                     device on each end and the policy routes between them
#   braid-fabric route [R...]         re-add rail R's policy routes (all rails if none given);
#                                     needed after `ip link set va<R>|vb<R> down` and back up,
#                                     because taking a link down deletes its routes
#   braid-fabric netem R a|b ARGS...  `tc qdisc replace dev v<side><R> root netem ARGS`, e.g.
#                                     `braid-fabric netem 1 b loss 100%` black-holes rail 1
#   braid-fabric clear R              remove rail R's qdiscs on both ends
#   braid-fabric gid DEV              print the GID index of DEV's IPv4 RoCE v2 GID
#   braid-fabric status               devices, addresses, rules, GIDs
#
# Layout, rail r (0-based): veth va<r> (10.88.r.1/24, rdma device rxe_a<r>) <-> vb<r>
# (10.88.r.2/24, rxe_b<r>), both in the guest's main network namespace. rxe in other namespaces
# does not work on 6.1 (reported by an earlier trial: it routes in init_net, and the first send
# completes with status 2; not re-tested here). Both
# addresses are then local, so the kernel would carry plain IP traffic between them (the TCP
# bootstrap of ibv_rc_pingpong or of braid, ping) over lo, past any fault injected on the rail:
# `ip rule` sends locally generated traffic for 10.88.r.2 to table 1000+2r (out of va<r>) and
# for 10.88.r.1 to table 1001+2r (out of vb<r>); the local table is moved behind those rules so
# packets arriving on a veth are still delivered locally (accept_local=1 lets a packet whose
# source is a local address in). rxe's own packets pin the output device, and were seen to
# cross the veth even without the rules on Debian's 6.1.0-57 (6.1.192); an earlier trial
# reported them going over lo, where rxe drops them.
#
# Faults: rxe treats a QP retry count of 7 as infinite, and downing the interface an rxe device
# sits on can leave its outstanding requests hanging forever: inject faults on the peer side
# (the other end of the pair) or with `netem loss 100%`.
set -euo pipefail

die() { echo "braid-fabric: error: $*" >&2; exit 1; }
rails_now() { local n=0; while [ -e "/sys/class/net/va$n" ]; do n=$((n + 1)); done; echo "$n"; }

# Commands for `ip -batch`: rail r's policy rules and routes.
rules_batch() { # rail
  local r=$1 ta=$((1000 + 2 * $1)) tb=$((1001 + 2 * $1))
  echo "rule add pref $((100 + r)) iif lo to 10.88.$r.2/32 lookup $ta"
  echo "rule add pref $((100 + r)) iif lo to 10.88.$r.1/32 lookup $tb"
}
routes_batch() { # rail
  local r=$1 ta=$((1000 + 2 * $1)) tb=$((1001 + 2 * $1))
  echo "route replace 10.88.$r.2/32 dev va$r src 10.88.$r.1 table $ta"
  echo "route replace 10.88.$r.1/32 dev vb$r src 10.88.$r.2 table $tb"
}

sysctl_w() { echo "$2" >"/proc/sys/${1//.//}"; }

# Under TCG every process start costs tens of milliseconds: one modprobe, two `ip -batch` and
# one `rdma -batch` set up any number of rails.
setup() {
  local rails=${1:-4} r s i
  if ! [[ $rails =~ ^[0-9]+$ ]] || [ "$rails" -lt 1 ] || [ "$rails" -gt 64 ]; then
    die "rails must be 1..64, not '$rails'"
  fi
  # crc32: rxe computes its ICRC with the crypto API's crc32; without the module `rdma link add`
  # fails. The others: the verbs and CM character devices, veth, the qdiscs used for faults.
  modprobe -a crc32_generic rdma_rxe ib_uverbs rdma_ucm veth sch_netem sch_tbf ||
    die "modprobe failed"
  modprobe -q -a crc32_pclmul ib_umad 2>/dev/null || true
  sysctl_w net.ipv4.conf.all.rp_filter 0
  sysctl_w net.ipv4.conf.default.rp_filter 0
  sysctl_w net.ipv4.conf.all.accept_local 1
  sysctl_w net.ipv4.conf.default.accept_local 1
  sysctl_w net.ipv4.conf.all.arp_ignore 1
  sysctl_w net.ipv4.conf.default.arp_ignore 1
  {
    echo "link set lo up"
    for ((r = 0; r < rails; r++)); do echo "link add va$r type veth peer name vb$r"; done
  } | ip -batch - || die "creating the veth pairs failed"
  {
    # The local table behind the per-rail rules (pref 100+r), ahead of main (32766).
    if ip rule show pref 0 | grep -q 'lookup local'; then
      echo "rule add pref 1000 lookup local"
      echo "rule del pref 0 lookup local"
    fi
    for ((r = 0; r < rails; r++)); do
      echo "addr add 10.88.$r.1/24 dev va$r"
      echo "addr add 10.88.$r.2/24 dev vb$r"
      echo "link set va$r up"
      echo "link set vb$r up"
      rules_batch "$r"
      routes_batch "$r"
    done
  } | ip -batch - || die "addresses, rules or routes failed"
  for ((r = 0; r < rails; r++)); do
    echo "link add rxe_a$r type rxe netdev va$r"
    echo "link add rxe_b$r type rxe netdev vb$r"
  done | rdma -b - || die "rdma link add failed"
  # The rxe devices show their IPv4 GIDs once the addresses are there; wait for the last one.
  for ((i = 0; i < 100; i++)); do
    gid "rxe_b$((rails - 1))" >/dev/null 2>&1 && break
    sleep 0.05
  done
  gid "rxe_b$((rails - 1))" >/dev/null || die "rxe_b$((rails - 1)) has no IPv4 GID"
  [ -c /dev/infiniband/uverbs0 ] || die "no /dev/infiniband/uverbs0"
}

gid() { # dev: the index of its IPv4-mapped RoCE v2 GID (shell built-ins only: it is polled)
  local dev=$1 d f i g t
  d=/sys/class/infiniband/$dev/ports/1
  [ -d "$d" ] || die "no rdma device $dev"
  for f in "$d"/gids/*; do
    i=${f##*/}
    read -r g <"$f" 2>/dev/null || continue
    case $g in 0000:0000:0000:0000:0000:ffff:*) ;; *) continue;; esac
    read -r t <"$d/gid_attrs/types/$i" 2>/dev/null || continue
    [ "$t" = "RoCE v2" ] || continue
    echo "$i"; return 0
  done
  die "$dev has no IPv4 RoCE v2 GID"
}

status() {
  rdma link show
  ip -br addr show | grep -E '^(lo|v[ab][0-9]+)' || true
  ip rule show
  local r n; n=$(rails_now)
  for ((r = 0; r < n; r++)); do
    echo "rail $r: rxe_a$r gid $(gid "rxe_a$r" 2>/dev/null || echo -)," \
      "rxe_b$r gid $(gid "rxe_b$r" 2>/dev/null || echo -);" \
      "table $((1000 + 2 * r)): $(ip route show table $((1000 + 2 * r)) | tr '\n' ' ')"
  done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  setup) setup "$@";;
  route)
    if [ $# -eq 0 ]; then n=$(rails_now); set -- $(seq 0 $((n - 1))); fi
    for r in "$@"; do [ -e "/sys/class/net/va$r" ] || die "no rail $r"; routes_batch "$r"; done |
      ip -batch -;;
  netem)
    [ $# -ge 3 ] || die "usage: braid-fabric netem RAIL a|b NETEM-ARGS..."
    r=$1 s=$2; shift 2
    case $s in a|b) ;; *) die "side must be a or b";; esac
    tc qdisc replace dev "v$s$r" root netem "$@";;
  clear)
    [ $# -eq 1 ] || die "usage: braid-fabric clear RAIL"
    tc qdisc del dev "va$1" root 2>/dev/null || true
    tc qdisc del dev "vb$1" root 2>/dev/null || true;;
  gid) [ $# -eq 1 ] || die "usage: braid-fabric gid DEV"; gid "$1";;
  status) status;;
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0";;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2;;
esac
