#!/usr/bin/env bash
# netbed: a rail-optimized fabric on one machine, built from network namespaces.
#
# H hosts (namespaces ${prefix}h0..), R rails. Rail r is one Linux bridge, ${prefix}br$r, living in
# a dedicated switch namespace ${prefix}sw, so nothing is ever added to the root namespace (its
# links, routes and firewall stay untouched, and no test traffic can reach a real network: the
# namespaces have no route out). Host h's NIC on rail r is the veth end eth$r inside ${prefix}h$h,
# addressed 10.77.$r.$((h+1))/24 (one subnet per rail, as rail-optimized fabrics are); its peer,
# the switch port h${h}r${r}, is enslaved to bridge r. Both directions of every NIC are shaped
# with tbf: the host end's egress (host -> switch) and the switch port's egress (switch -> host).
#
# Shaping: tbf rate RATE, burst max(256 KB, 2 ms at RATE), latency 20 ms (the queue bound). TCP
# goodput through it is 95.6% of RATE (1448 payload bytes per 1514-byte frame), e.g. 478 Mbit/s
# at 500mbit, 192 at 200mbit, 48.7 at 50mbit, per rail and with every rail busy at once. veth
# offloads (TSO/GSO/GRO) stay on: tbf accounts a GSO packet by its segments' wire size, so rates
# are exact with them, and the CPU cost is lower (--offload off is there for comparison).
#
# Faults, all applied on the switch side so the host sees what a real host would:
#   cut       switch port down: the host NIC loses carrier (NO-CARRIER, operstate DOWN), as when
#             a cable or switch port fails. The host's kernel flushes its neighbour (ARP) entries
#             on that NIC and flags its rail route "linkdown" (kept, still chosen); the NIC's
#             qdisc drops what it is given. Peers keep their (now useless) entries for the host.
#             With --admin the host end is also set admin-down, as `ip link set eth$r down`
#             would: the kernel then removes the rail's connected route (the address stays),
#             and new sends fail at once with ENETUNREACH.
#   blackhole nftables, netdev family, in the switch namespace: ingress and egress chains on the
#             switch port drop every frame, ARP included, both ways. The link stays UP with
#             carrier; the host's sends succeed locally and vanish. Resolved ARP entries on
#             either side stay usable until their reachable time (15-45 s) lapses, then are
#             probed and go FAILED; new resolutions fail after ~3 s. Status shows drop counts.
#   shape     replace the tbf on both ends of one NIC (degrade or speed up), live, no reset.
#   reset     resets the host's TCP connections on one NIC, as a middlebox or a peer's crash
#             would, without SOCK_DESTROY (ss -K, absent from some kernels): for HOLD seconds
#             (--hold, default 0.3) nftables, inet family, in the host's namespace answers every
#             TCP segment the host sends on the NIC (except resets) with a TCP reset, so each of
#             its connections there fails with ECONNRESET at its next send; the peer's end is
#             reset by the RST the host's kernel answers its next segment with. New connections
#             from the host on that NIC are refused meanwhile and succeed afterwards: the rule is
#             removed when the command returns (nothing for restore to undo). Prints how many
#             segments were answered with a reset.
#   restore   undoes all of the above for one NIC: nft chains removed, configured rate back on
#             both ends, switch port and host end up, address and rail route re-added (IPv4
#             re-adds the route itself on link-up; restore makes sure). It waits (<= 3 s) until
#             both ends are operationally up and the bridge port forwards, then drops the ARP
#             entries the fault left INCOMPLETE or FAILED (on the host and, for its address, on
#             its peers), so the first packet after a restore resolves at once instead of
#             waiting up to a second for the kernel's next ARP retry.
# All of these work while traffic runs; TCP stalls during a fault and resumes after a restore.
#
# Needs root, ip (iproute2), tc, nft; iperf/iperf-all need iperf3; --offload off needs ethtool.
set -euo pipefail

PROG=${0##*/}
PREFIX=${NETBED_PREFIX:-bn}
DEFAULT_RATE=500mbit
TBF_LATENCY=${NETBED_TBF_LATENCY:-20ms}
MIN_BURST=262144 # bytes: the issue requires >= 256 KB; smaller bursts distort TCP at these rates

usage() {
  cat <<EOF
usage: $PROG [--prefix P] COMMAND [ARGS]

A rail-optimized fabric on one machine: namespaces ${PREFIX}h0.. as hosts, one bridge per rail
(in the switch namespace ${PREFIX}sw), veth NICs eth\$r at 10.77.\$r.\$((h+1))/24, tc-shaped.

commands:
  up --hosts H --rails R [--rate RATE] [--prefix P] [--nics-per-device K] [--offload on|off]
                        build the fabric (RATE default $DEFAULT_RATE, e.g. 200mbit, 1gbit).
                        K groups rails into devices of K NICs (recorded, shown by status).
                        --offload off turns TSO/GSO/GRO off on every veth (default on).
  down                  tear everything down (idempotent; also after a partial up)
  status                namespaces, links, carrier, qdisc rates (host/switch side), faults
  exec HOST CMD...      run CMD in host HOST's namespace (HOST: index, or "sw")
  ns HOST               print the namespace name of host HOST
  addr HOST RAIL        print the address of host HOST's NIC on rail RAIL
  shape HOST RAIL RATE  set one NIC's rate, both directions (degrade or speed up)
  cut HOST RAIL [--admin]
                        switch port down: the NIC loses carrier. --admin: also set the host end
                        admin-down (removes the rail route)
  blackhole HOST RAIL   drop everything (ARP too) to and from the NIC at its switch port;
                        the link stays UP
  reset HOST RAIL [--hold SECONDS]
                        reset the host's TCP connections on the NIC (TCP resets for SECONDS,
                        default 0.3; then removed); prints how many segments were reset
  restore HOST RAIL     undo cut/blackhole/shape: back to the configured rate, routes re-added
  iperf A B RAIL [SECS] iperf3 server in B, client in A over rail RAIL; prints Mbit/s
  iperf-all A B [SECS]  one iperf3 stream per rail in parallel; per-rail and total Mbit/s

options:
  --prefix P            name prefix (default \$NETBED_PREFIX or "bn"): [a-z][a-z0-9]{0,9}
  -h, --help            this text

State: \${NETBED_STATE_DIR:-/run}/braid-netbed-P.state (falls back to \${TMPDIR:-/tmp}).
Shaping: tbf, burst max(256 KB, 2 ms at the rate), latency \$NETBED_TBF_LATENCY (default 20ms).
Faults are applied at the switch port; see the header of this script for what each does to
carrier, routes and ARP.
EOF
}

die() { echo "$PROG: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }

need_root() { [ "$(id -u)" -eq 0 ] || die "needs root"; }
need_tools() {
  local t
  for t in "$@"; do command -v "$t" >/dev/null 2>&1 || die "missing tool: $t (apt-get install -y iproute2 nftables iperf3 ethtool)"; done
}

check_prefix() {
  [[ $1 =~ ^[a-z][a-z0-9]{0,9}$ ]] || die "bad prefix '$1': want [a-z][a-z0-9]{0,9}"
}

# ---- names -----------------------------------------------------------------------------------

sw_ns() { echo "${PREFIX}sw"; }
host_ns() { echo "${PREFIX}h$1"; }
bridge() { echo "${PREFIX}br$1"; }
sw_port() { echo "h${1}r${2}"; }
nic() { echo "eth$1"; }
nic_addr() { echo "10.77.$2.$(($1 + 1))"; }

# ---- state file: key=value lines -------------------------------------------------------------

state_file() {
  local dir=${NETBED_STATE_DIR:-/run}
  [ -d "$dir" ] && [ -w "$dir" ] || dir=${TMPDIR:-/tmp}
  echo "$dir/braid-netbed-$PREFIX.state"
}

state_get() { # key -> value (empty if absent)
  awk -F= -v k="$1" '$1 == k { v = substr($0, length(k) + 2) } END { print v }' "$STATE"
}

state_set() { # key value
  local tmp="$STATE.tmp.$$"
  awk -F= -v k="$1" '$1 != k' "$STATE" >"$tmp"
  printf '%s=%s\n' "$1" "$2" >>"$tmp"
  mv -f "$tmp" "$STATE"
}

load_state() {
  STATE=$(state_file)
  [ -f "$STATE" ] || die "no fabric '$PREFIX' (no $STATE); run: $PROG up --hosts H --rails R"
  HOSTS=$(state_get hosts)
  RAILS=$(state_get rails)
  RATE=$(state_get rate)
  [[ $HOSTS =~ ^[0-9]+$ && $RAILS =~ ^[0-9]+$ && -n $RATE ]] || die "corrupt state file $STATE"
}

lock_state() { exec 9>"$STATE.lock"; flock 9; }

in_range() { # value lo hi: an integer within [lo, hi]
  [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]
}

check_host() {
  in_range "$1" 0 $((HOSTS - 1)) || die "bad host '$1' (0..$((HOSTS - 1)))"
}
check_rail() {
  in_range "$1" 0 $((RAILS - 1)) || die "bad rail '$1' (0..$((RAILS - 1)))"
}

# ---- shaping ---------------------------------------------------------------------------------

rate_bps() { # tc-style rate (decimal units, bits) -> bits per second; dies on anything else
  local r=${1,,}
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] || die "bad rate '$1' (e.g. 50mbit, 1gbit)"
  awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
    m = (u == "bit") ? 1 : (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1e12
    printf "%.0f\n", n * m }'
}

burst_bytes() { # rate -> tbf burst: at least 256 KB, and at least 2 ms of traffic at the rate
  local b
  b=$(($(rate_bps "$1") / 8 / 500))
  [ "$b" -gt "$MIN_BURST" ] || b=$MIN_BURST
  echo "$b"
}

shape_dev() { # ns dev rate
  local bps
  bps=$(rate_bps "$3")
  [ "$bps" -ge 8000 ] || die "rate '$3' too low"
  tc -n "$1" qdisc replace dev "$2" root tbf rate "$3" burst "$(burst_bytes "$3")" latency "$TBF_LATENCY"
}

shape_nic() { # host rail rate: both directions
  shape_dev "$(host_ns "$1")" "$(nic "$2")" "$3"
  shape_dev "$(sw_ns)" "$(sw_port "$1" "$2")" "$3"
}

# ---- up --------------------------------------------------------------------------------------

ns_sysctls() { # ns: no IPv6 (no ND/MLD chatter on shaped links), no reverse-path filtering
  # shellcheck disable=SC2016 # expanded by the inner shell
  ip netns exec "$1" sh -c 'for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 \
      /proc/sys/net/ipv6/conf/default/disable_ipv6; do [ -w "$f" ] && echo 1 >"$f"; done
    echo 0 >/proc/sys/net/ipv4/conf/all/rp_filter; echo 0 >/proc/sys/net/ipv4/conf/default/rp_filter'
}

make_ns() { # ns
  ip netns add "$1"
  ns_sysctls "$1"
  ip -n "$1" link set lo up
}

set_offload() { # ns dev on|off
  ip netns exec "$1" ethtool -K "$2" tso "$3" gso "$3" gro "$3" >/dev/null 2>&1 ||
    ip netns exec "$1" ethtool -K "$2" tso "$3" gso "$3" >/dev/null
}

make_nic() { # host rail
  local h=$1 r=$2 hns sns port dev
  hns=$(host_ns "$h") sns=$(sw_ns) port=$(sw_port "$h" "$r") dev=$(nic "$r")
  ip -n "$sns" link add "$port" type veth peer name "$dev" netns "$hns"
  ip -n "$sns" link set "$port" master "$(bridge "$r")"
  ip -n "$hns" addr add "$(nic_addr "$h" "$r")/24" dev "$dev"
  if [ "$OFFLOAD" = off ]; then
    set_offload "$sns" "$port" off
    set_offload "$hns" "$dev" off
  fi
  shape_nic "$h" "$r" "$RATE"
  ip -n "$sns" link set "$port" up
  ip -n "$hns" link set "$dev" up
  printf 'rate_%s_%s=%s\ncut_%s_%s=0\nbh_%s_%s=0\n' "$h" "$r" "$RATE" "$h" "$r" "$h" "$r" >>"$STATE"
}

cmd_up() {
  local hosts='' rails='' rate=$DEFAULT_RATE npd=1 offload=on h r t0
  while [ $# -gt 0 ]; do
    case $1 in
      --hosts) hosts=${2:-}; shift 2 ;;
      --rails) rails=${2:-}; shift 2 ;;
      --rate) rate=${2:-}; shift 2 ;;
      --prefix) PREFIX=${2:-}; check_prefix "$PREFIX"; shift 2 ;;
      --nics-per-device) npd=${2:-}; shift 2 ;;
      --offload) offload=${2:-}; shift 2 ;;
      -h | --help) usage; exit 0 ;;
      *) die "up: unknown argument '$1'" ;;
    esac
  done
  in_range "$hosts" 1 254 || die "up: --hosts 1..254"
  in_range "$rails" 1 64 || die "up: --rails 1..64"
  if ! in_range "$npd" 1 "$rails" || [ $((rails % npd)) -ne 0 ]; then die "up: --nics-per-device must divide --rails"; fi
  [[ $offload =~ ^(on|off)$ ]] || die "up: --offload on|off"
  rate_bps "$rate" >/dev/null
  need_root
  need_tools ip tc nft
  [ "$offload" = on ] || need_tools ethtool
  STATE=$(state_file)
  [ ! -e "$STATE" ] || die "fabric '$PREFIX' already up ($STATE); run: $PROG --prefix $PREFIX down"
  [ -z "$(list_ns)" ] || die "namespaces of '$PREFIX' exist ($(list_ns | tr '\n' ' ')); run: $PROG --prefix $PREFIX down"
  HOSTS=$hosts RAILS=$rails RATE=$rate OFFLOAD=$offload
  t0=$(date +%s.%N)
  # A failed step exits (set -e); the trap then removes whatever was made.
  trap 'note "up failed; tearing down the partial fabric"; teardown' EXIT
  trap 'exit 130' INT TERM HUP
  printf 'hosts=%s\nrails=%s\nrate=%s\nnics_per_device=%s\noffload=%s\ntbf_latency=%s\n' \
    "$HOSTS" "$RAILS" "$RATE" "$npd" "$OFFLOAD" "$TBF_LATENCY" >"$STATE"
  make_ns "$(sw_ns)"
  for ((r = 0; r < RAILS; r++)); do
    # No STP: ports forward as soon as they are up. No multicast snooping: nothing to snoop.
    ip -n "$(sw_ns)" link add "$(bridge "$r")" type bridge stp_state 0 forward_delay 0 mcast_snooping 0
    ip -n "$(sw_ns)" link set "$(bridge "$r")" up
  done
  for ((h = 0; h < HOSTS; h++)); do
    make_ns "$(host_ns "$h")"
    for ((r = 0; r < RAILS; r++)); do make_nic "$h" "$r"; done
  done
  trap - EXIT INT TERM HUP
  echo "netbed $PREFIX up: $HOSTS hosts x $RAILS rails at $RATE in $(awk -v a="$t0" -v b="$(date +%s.%N)" \
    'BEGIN { printf "%.2f", b - a }') s (state $STATE)"
}

# ---- down ------------------------------------------------------------------------------------

list_ns() { # this prefix's namespaces, hosts and switch, whether or not a state file exists
  ip netns list 2>/dev/null | awk -v p="$PREFIX" '{ n = $1 } n == p "sw" || n ~ ("^" p "h[0-9]+$") { print n }'
}

teardown() {
  local ns pids pid
  STATE=${STATE:-$(state_file)}
  for ns in $(list_ns); do
    # Processes still inside (iperf3 servers, tests run via exec) would pin the namespace.
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    for pid in $pids; do kill "$pid" 2>/dev/null || true; done
    [ -z "$pids" ] || sleep 0.2
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -f "$STATE" "$STATE.lock" "$STATE".tmp.*
  [ -z "$(list_ns)" ]
}

cmd_down() {
  local t0
  need_root
  need_tools ip
  t0=$(date +%s.%N)
  teardown || die "down: namespaces left: $(list_ns | tr '\n' ' ')"
  echo "netbed $PREFIX down in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
}

# ---- faults ----------------------------------------------------------------------------------

nft_sw() { ip netns exec "$(sw_ns)" nft "$@"; }

blackhole_on() { # host rail
  local port
  port=$(sw_port "$1" "$2")
  nft_sw add table netdev netbed
  # netdev hooks see every frame (ARP too) at the port, before the qdisc and the bridge.
  nft_sw add chain netdev netbed "in_$port" "{ type filter hook ingress device \"$port\" priority 0; policy accept; }"
  nft_sw add rule netdev netbed "in_$port" counter drop
  nft_sw add chain netdev netbed "out_$port" "{ type filter hook egress device \"$port\" priority 0; policy accept; }"
  nft_sw add rule netdev netbed "out_$port" counter drop
}

blackhole_off() { # host rail
  local port c
  port=$(sw_port "$1" "$2")
  for c in "in_$port" "out_$port"; do
    if nft_sw list chain netdev netbed "$c" >/dev/null 2>&1; then nft_sw delete chain netdev netbed "$c"; fi
  done
}

wait_ready() { # host rail: up to 3 s for both ends to be operationally up and the port forwarding
  # Carrier changes reach operstate, the qdisc (noop while there is no carrier) and the bridge
  # port state through the kernel's linkwatch work, which may run up to a second later.
  local hns sns dev port i
  hns=$(host_ns "$1") sns=$(sw_ns) dev=$(nic "$2") port=$(sw_port "$1" "$2")
  for ((i = 0; i < 60; i++)); do
    [ "$(ip netns exec "$hns" cat "/sys/class/net/$dev/operstate" 2>/dev/null)" = up ] &&
      [ "$(ip netns exec "$sns" cat "/sys/class/net/$port/operstate" 2>/dev/null)" = up ] &&
      [ "$(ip netns exec "$sns" cat "/sys/class/net/$port/brport/state" 2>/dev/null)" = 3 ] && return 0
    sleep 0.05
  done
  note "warning: $dev of host $1 is not up and forwarding 3 s after restore"
}

wait_down() { # ns dev: up to 1 s for the host end to report the loss of its link
  local i
  for ((i = 0; i < 20; i++)); do
    [ "$(ip netns exec "$1" cat "/sys/class/net/$2/operstate" 2>/dev/null)" != up ] && return 0
    sleep 0.05
  done
  note "warning: $2 in $1 still up 1 s after the cut"
}

flush_unresolved() { # host rail: forget the ARP entries the fault left unresolved, on both sides
  # An entry left INCOMPLETE retries only once a second and a FAILED one may hold packets back,
  # so without this the first packets after a restore can wait up to a second. Resolved entries
  # (REACHABLE, STALE, DELAY, PROBE) are kept: they still carry traffic.
  local h r=$2 addr
  addr=$(nic_addr "$1" "$r")
  ip -n "$(host_ns "$1")" neigh flush dev "$(nic "$r")" nud incomplete nud failed >/dev/null 2>&1 || true
  for ((h = 0; h < HOSTS; h++)); do
    [ "$h" = "$1" ] ||
      ip -n "$(host_ns "$h")" neigh flush to "$addr" dev "$(nic "$r")" nud incomplete nud failed >/dev/null 2>&1 || true
  done
}

nic_cmd() { # shared set-up for the per-NIC commands: host rail
  need_root
  load_state
  check_host "$1"
  check_rail "$2"
  lock_state
}

cmd_shape() {
  [ $# -eq 3 ] || die "usage: $PROG shape HOST RAIL RATE"
  nic_cmd "$1" "$2"
  shape_nic "$1" "$2" "$3"
  state_set "rate_$1_$2" "$3"
}

cmd_cut() {
  local admin=0
  [ $# -eq 2 ] || { [ $# -eq 3 ] && [ "$3" = --admin ] && admin=1; } || die "usage: $PROG cut HOST RAIL [--admin]"
  nic_cmd "$1" "$2"
  ip -n "$(sw_ns)" link set "$(sw_port "$1" "$2")" down
  if [ "$admin" = 1 ]; then
    ip -n "$(host_ns "$1")" link set "$(nic "$2")" down
    state_set "cut_$1_$2" admin
  else
    state_set "cut_$1_$2" 1
  fi
  wait_down "$(host_ns "$1")" "$(nic "$2")"
}

cmd_blackhole() {
  [ $# -eq 2 ] || die "usage: $PROG blackhole HOST RAIL"
  nic_cmd "$1" "$2"
  need_tools nft
  blackhole_off "$1" "$2"
  blackhole_on "$1" "$2"
  state_set "bh_$1_$2" 1
}

cmd_reset() {
  local hold=0.3 ns table n
  if [ $# -eq 4 ] && [ "$3" = --hold ]; then hold=$4
  elif [ $# -ne 2 ]; then die "usage: $PROG reset HOST RAIL [--hold SECONDS]"; fi
  [[ $hold =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad --hold '$hold' (seconds)"
  nic_cmd "$1" "$2"
  need_tools nft
  ns=$(host_ns "$1") table="netbed_reset_$2"
  ip netns exec "$ns" nft delete table inet "$table" 2>/dev/null || true
  ip netns exec "$ns" nft -f - <<EOF
table inet $table {
  chain out {
    type filter hook output priority 0; policy accept;
    oifname "$(nic "$2")" tcp flags & rst != rst counter reject with tcp reset
  }
}
EOF
  sleep "$hold"
  n=$(ip netns exec "$ns" nft list chain inet "$table" out | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
  ip netns exec "$ns" nft delete table inet "$table"
  echo "reset: ${n:-0} TCP segments of host $1 on $(nic "$2") answered with a reset in $hold s"
}

cmd_restore() {
  local hns dev
  [ $# -eq 2 ] || die "usage: $PROG restore HOST RAIL"
  nic_cmd "$1" "$2"
  hns=$(host_ns "$1") dev=$(nic "$2")
  blackhole_off "$1" "$2"
  shape_nic "$1" "$2" "$RATE"
  ip -n "$(sw_ns)" link set "$(sw_port "$1" "$2")" up
  ip -n "$hns" link set "$dev" up
  # IPv4 keeps addresses across link-down and re-adds the connected route on link-up; replace
  # both anyway so a restore also repairs a hand-deleted address or route.
  ip -n "$hns" addr replace "$(nic_addr "$1" "$2")/24" dev "$dev"
  ip -n "$hns" route replace "10.77.$2.0/24" dev "$dev" proto kernel scope link src "$(nic_addr "$1" "$2")"
  wait_ready "$1" "$2"
  flush_unresolved "$1" "$2"
  state_set "rate_$1_$2" "$RATE"
  state_set "cut_$1_$2" 0
  state_set "bh_$1_$2" 0
}

# ---- status ----------------------------------------------------------------------------------

qdisc_rate() { # ns dev -> rate of its root tbf, or "-"
  tc -n "$1" qdisc show dev "$2" 2>/dev/null |
    awk '$2 == "tbf" { for (i = 1; i < NF; i++) if ($i == "rate") { print $(i + 1); f = 1 } } END { if (!f) print "-" }'
}

link_state() { # ns dev -> ADMIN/OPER/carrier summary, e.g. "up/UP/carrier"
  ip -n "$1" -o link show dev "$2" 2>/dev/null | awk '{
    admin = ($3 ~ /[<,]UP[,>]/) ? "up" : "down"; car = ($3 ~ /LOWER_UP/) ? "carrier" : "no-carrier"
    for (i = 1; i < NF; i++) if ($i == "state") oper = $(i + 1)
    print admin "/" oper "/" car }' | grep . || echo missing
}

bh_drops() { # host rail -> packets dropped by the black hole so far (in+out), or "-"
  local port
  port=$(sw_port "$1" "$2")
  { nft_sw list chain netdev netbed "in_$port" 2>/dev/null; nft_sw list chain netdev netbed "out_$port" 2>/dev/null; } |
    awk '/counter packets/ { for (i = 1; i < NF; i++) if ($i == "packets") { s += $(i + 1); f = 1 } }
      END { if (f) print s; else print "-" }'
}

cmd_status() {
  local h r hns port fault cut npd
  need_root
  load_state
  npd=$(state_get nics_per_device)
  echo "netbed $PREFIX: $HOSTS hosts x $RAILS rails, rate $RATE, ${npd:-1} NIC(s) per device," \
    "offload $(state_get offload), switch namespace $(sw_ns), state $STATE"
  echo "namespaces: $(list_ns | tr '\n' ' ')"
  for ((r = 0; r < RAILS; r++)); do
    printf 'rail %d: bridge %s %s, subnet 10.77.%d.0/24\n' "$r" "$(bridge "$r")" \
      "$(link_state "$(sw_ns)" "$(bridge "$r")")" "$r"
  done
  if [ "${npd:-1}" -gt 1 ]; then
    for ((r = 0; r < RAILS; r += npd)); do
      printf 'device %d: NICs eth%d..eth%d\n' $((r / npd)) "$r" $((r + npd - 1))
    done
  fi
  printf '%-4s %-4s %-8s %-5s %-15s %-26s %-22s %-9s %-9s %s\n' host rail ns nic address \
    'host link (admin/oper)' 'switch port' 'rate out' 'rate in' fault
  for ((h = 0; h < HOSTS; h++)); do
    hns=$(host_ns "$h")
    for ((r = 0; r < RAILS; r++)); do
      port=$(sw_port "$h" "$r")
      fault=''
      cut=$(state_get "cut_${h}_${r}")
      [ "$cut" = 1 ] && fault+="cut "
      [ "$cut" = admin ] && fault+="cut(admin) "
      [ "$(state_get "bh_${h}_${r}")" = 1 ] && fault+="blackhole(drops $(bh_drops "$h" "$r")) "
      [ "$(state_get "rate_${h}_${r}")" = "$RATE" ] || fault+="shaped($(state_get "rate_${h}_${r}")) "
      printf '%-4s %-4s %-8s %-5s %-15s %-26s %-22s %-9s %-9s %s\n' "$h" "$r" "$hns" "$(nic "$r")" \
        "$(nic_addr "$h" "$r")/24" "$(link_state "$hns" "$(nic "$r")")" "$port $(link_state "$(sw_ns)" "$port")" \
        "$(qdisc_rate "$hns" "$(nic "$r")")" "$(qdisc_rate "$(sw_ns)" "$port")" "${fault:-ok}"
    done
  done
}

# ---- exec, iperf -----------------------------------------------------------------------------

ns_of() { # HOST index or "sw" -> namespace
  if [ "$1" = sw ]; then sw_ns; else check_host "$1"; host_ns "$1"; fi
}

cmd_exec() {
  [ $# -ge 2 ] || die "usage: $PROG exec HOST CMD..."
  need_root
  load_state
  local ns
  ns=$(ns_of "$1")
  shift
  exec ip netns exec "$ns" "$@"
}

wait_listen() { # ns addr port: up to 3 s for an iperf3 server to listen
  local i
  for ((i = 0; i < 60; i++)); do
    [ -n "$(ip netns exec "$1" ss -Hltn src "$2" sport = ":$3" 2>/dev/null)" ] && return 0
    sleep 0.05
  done
  return 1
}

IPERF_TMP='' IPERF_PIDS=()
iperf_cleanup() {
  local p
  for p in "${IPERF_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${IPERF_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -z "$IPERF_TMP" ] || rm -rf "$IPERF_TMP"
}

iperf_start_server() { # b rail
  local b=$1 r=$2
  ip netns exec "$(host_ns "$b")" iperf3 -s -1 -B "$(nic_addr "$b" "$r")" -p $((5201 + r)) \
    >"$IPERF_TMP/server$r" 2>&1 &
  IPERF_PIDS+=($!)
}

iperf_client() { # a b rail secs: writes $IPERF_TMP/client$rail
  local a=$1 b=$2 r=$3 s=$4
  timeout $((s + 15)) ip netns exec "$(host_ns "$a")" iperf3 -c "$(nic_addr "$b" "$r")" \
    -B "$(nic_addr "$a" "$r")" -p $((5201 + r)) -t "$s" -f m --connect-timeout 3000 \
    >"$IPERF_TMP/client$r" 2>&1
}

iperf_mbits() { # rail -> receiver Mbit/s from the client's report; fails if there is none
  awk '/receiver/ { for (i = 2; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { if (v == "") exit 1; print v }' \
    "$IPERF_TMP/client$1" || { note "iperf3 on rail $1 failed:"; cat "$IPERF_TMP/client$1" >&2; return 1; }
}

iperf_prepare() { # a b secs
  need_root
  load_state
  need_tools iperf3 timeout
  check_host "$1"
  check_host "$2"
  [ "$1" != "$2" ] || die "iperf: hosts must differ"
  in_range "$3" 1 3600 || die "iperf: SECS must be a positive integer"
  IPERF_TMP=$(mktemp -d "${TMPDIR:-/tmp}/netbed-iperf.XXXXXX")
  trap iperf_cleanup EXIT
  trap 'exit 130' INT TERM HUP
}

cmd_iperf() {
  [ $# -eq 3 ] || [ $# -eq 4 ] || die "usage: $PROG iperf HOSTA HOSTB RAIL [SECONDS]"
  local a=$1 b=$2 r=$3 s=${4:-5}
  iperf_prepare "$a" "$b" "$s"
  check_rail "$r"
  iperf_start_server "$b" "$r"
  wait_listen "$(host_ns "$b")" "$(nic_addr "$b" "$r")" $((5201 + r)) || die "iperf3 server did not start"
  iperf_client "$a" "$b" "$r" "$s" || true
  iperf_mbits "$r"
}

cmd_iperf_all() {
  [ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: $PROG iperf-all HOSTA HOSTB [SECONDS]"
  local a=$1 b=$2 s=${3:-5} r v total=0 bad=0 clients=()
  iperf_prepare "$a" "$b" "$s"
  for ((r = 0; r < RAILS; r++)); do iperf_start_server "$b" "$r"; done
  for ((r = 0; r < RAILS; r++)); do
    wait_listen "$(host_ns "$b")" "$(nic_addr "$b" "$r")" $((5201 + r)) || die "iperf3 server on rail $r did not start"
  done
  for ((r = 0; r < RAILS; r++)); do
    iperf_client "$a" "$b" "$r" "$s" &
    clients+=($!)
  done
  for r in "${clients[@]}"; do wait "$r" || true; done
  for ((r = 0; r < RAILS; r++)); do
    if v=$(iperf_mbits "$r"); then
      echo "rail $r: $v Mbit/s"
      total=$(awk -v t="$total" -v v="$v" 'BEGIN { print t + v }')
    else
      echo "rail $r: failed"
      bad=1
    fi
  done
  echo "total: $total Mbit/s"
  [ "$bad" -eq 0 ]
}

# ---- main ------------------------------------------------------------------------------------

main() {
  while [ $# -gt 0 ]; do
    case $1 in
      --prefix) PREFIX=${2:-}; shift 2 ;;
      -h | --help) usage; exit 0 ;;
      *) break ;;
    esac
  done
  check_prefix "$PREFIX"
  [ $# -gt 0 ] || { usage >&2; exit 2; }
  local cmd=$1
  shift
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    exec) cmd_exec "$@" ;;
    ns) [ $# -eq 1 ] || die "usage: $PROG ns HOST"; load_state; check_host "$1"; host_ns "$1" ;;
    addr) [ $# -eq 2 ] || die "usage: $PROG addr HOST RAIL"; load_state; check_host "$1"; check_rail "$2"; nic_addr "$1" "$2" ;;
    shape) cmd_shape "$@" ;;
    cut) cmd_cut "$@" ;;
    blackhole) cmd_blackhole "$@" ;;
    reset) cmd_reset "$@" ;;
    restore) cmd_restore "$@" ;;
    iperf) cmd_iperf "$@" ;;
    iperf-all) cmd_iperf_all "$@" ;;
    help) usage ;;
    *) die "unknown command '$cmd' (see --help)" ;;
  esac
}

main "$@"
