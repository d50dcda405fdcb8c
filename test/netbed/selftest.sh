#!/usr/bin/env bash
# Self-test of the netbed: builds a 2-host, 4-rail fabric at 200mbit and checks connectivity on
# every rail, that tbf really limits (both directions), degrading a rail (also while traffic
# runs), cut (carrier loss and admin-down) and restore, a reset of a running transfer's
# connection, black hole and restore, and that down
# leaves nothing behind. Needs root; skips (exit 0) with a message without it or without the
# tools and kernel features. Takes about 25 s. Prints "netbed selftest: N passed, M failed" and
# exits non-zero on failure. Its fabric has its own prefix, so it can run next to another one.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
NB="$HERE/netbed.sh"
RATE_MBIT=200
HOSTS=2 RAILS=4
export NETBED_PREFIX=${NETBED_SELFTEST_PREFIX:-st$$}
P=$NETBED_PREFIX
pass=0 fail=0

skip() { echo "netbed: skipped ($*)"; exit 0; }
ok() { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { # name command...: passes when the command succeeds
  local name=$1
  shift
  if "$@"; then ok "$name"; else bad "$name"; fi
}

[ "$(id -u)" -eq 0 ] || skip "needs root"
for t in ip tc nft iperf3 ping timeout; do
  command -v "$t" >/dev/null 2>&1 || skip "needs $t: apt-get install -y iproute2 nftables iperf3 iputils-ping"
done

# Can this kernel and this container do what the netbed needs? Probe in a throwaway namespace.
probe_features() {
  local ns="${P}probe" rc=0
  ip netns add "$ns" || return 1
  { ip -n "$ns" link add pa type veth peer name pb &&
    ip -n "$ns" link add pbr type bridge &&
    ip -n "$ns" link set pb master pbr &&
    tc -n "$ns" qdisc add dev pa root tbf rate 100mbit burst 256kb latency 20ms &&
    ip netns exec "$ns" nft add table netdev probe &&
    ip netns exec "$ns" nft add chain netdev probe e '{ type filter hook egress device "pa" priority 0; }'; } || rc=1
  ip netns del "$ns" || true
  return $rc
} >/dev/null 2>&1
probe_features || skip "kernel or container lacks namespaces, veth, bridge, tbf or nftables netdev egress"

cleanup() { "$NB" down >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP # so that the EXIT trap tears down
t_start=$SECONDS

in_band() { # value lo hi (floats)
  awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'
}

ping_ok() { # from to rail
  "$NB" exec "$1" ping -c1 -W1 -q "$("$NB" addr "$2" "$3")" >/dev/null 2>&1
}
ping_fails() { ! ping_ok "$@"; }

iperf_in() { # a b rail secs rate_mbit: receiver throughput within 85%..105% of the rate
  local v
  v=$("$NB" iperf "$1" "$2" "$3" "$4") || { echo "    iperf3 failed"; return 1; }
  echo "    iperf3 host $1 -> host $2, rail $3: $v Mbit/s (shaped at $5 Mbit/s)"
  in_band "$v" "$(awk -v r="$5" 'BEGIN { print r * 0.85 }')" "$(awk -v r="$5" 'BEGIN { print r * 1.05 }')"
}

has() { # regex command...: the command succeeds and its output matches (no early-exit pipes)
  local out
  out=$("${@:2}") && grep -Eq "$1" <<<"$out"
}
link_flags() { "$NB" exec "$1" ip -o link show dev "eth$2"; }
has_carrier() { has 'LOWER_UP' link_flags "$1" "$2"; }
no_carrier() { has 'NO-CARRIER' link_flags "$1" "$2"; }
link_up() { has '<([^>]*,)?UP[,>].*LOWER_UP.* state UP ' link_flags "$1" "$2"; }
has_route() { [ -n "$("$NB" exec "$1" ip route show "10.77.$2.0/24")" ]; }
no_route() { ! has_route "$@"; }
tbf_rate_is() { # host rail rate-as-tc-prints-it: both ends of the NIC
  has "tbf .*rate $3 " "$NB" exec "$1" tc qdisc show dev "eth$2" &&
    has "tbf .*rate $3 " "$NB" exec sw tc qdisc show dev "h$1r$2"
}

up_refused() { ! "$NB" up --hosts 2 --rails 1 2>/dev/null; }
route_via() { has " dev $3 " "$NB" exec "$1" ip route get "$2"; }
restored() { ping_ok 0 1 "$1" && ping_ok 1 0 "$1"; } # rail
status_has() { has "$1" "$NB" status; }
all_ok() { # every NIC row of status ends in "ok"
  local out
  out=$("$NB" status)
  [ "$(awk '$1 ~ /^[0-9]+$/ && $NF != "ok"' <<<"$out" | wc -l)" -eq 0 ]
}

all_rails_ping() {
  local r rc=0
  for ((r = 0; r < RAILS; r++)); do
    if ping_ok 0 1 "$r" && ping_ok 1 0 "$r"; then echo "    rail $r: ping both ways"; else echo "    rail $r: no ping"; rc=1; fi
  done
  return $rc
}

nothing_left() {
  local left
  left=$(ip netns list | awk -v p="$P" '$1 == p "sw" || $1 ~ ("^" p "h[0-9]+$") || $1 == p "probe"')
  [ -z "$left" ] || { echo "    namespaces left: $left"; return 1; }
  # Nothing is ever made in the root namespace; check no bridge or veth of ours leaked there.
  left=$(ip -o link show | awk -F': ' -v p="$P" '$2 ~ ("^" p "br[0-9]+") || $2 ~ /^h[0-9]+r[0-9]+(@|$)/ { print $2 }')
  [ -z "$left" ] || { echo "    links left in the root namespace: $left"; return 1; }
  ! ls /run/braid-netbed-"$P".state* "${TMPDIR:-/tmp}"/braid-netbed-"$P".state* >/dev/null 2>&1 ||
    { echo "    state file left"; return 1; }
}

# ---- the tests -------------------------------------------------------------------------------

t0=$SECONDS
if ! "$NB" up --hosts "$HOSTS" --rails "$RAILS" --rate "${RATE_MBIT}mbit"; then
  bad "up --hosts $HOSTS --rails $RAILS --rate ${RATE_MBIT}mbit"
  echo "netbed selftest: $pass passed, $fail failed"
  exit 1
fi
ok "up ($((SECONDS - t0)) s)"
check "up refuses a second fabric of the same prefix" up_refused
check "every rail pings both ways" all_rails_ping
check "rails are separate subnets (rail 1's peer is reached through eth1)" route_via 0 10.77.1.2 eth1
check "tbf on both ends of every NIC" tbf_rate_is 1 3 "${RATE_MBIT}Mbit"

check "shaping limits host 0 -> host 1 (85%..105%)" iperf_in 0 1 0 2 "$RATE_MBIT"

"$NB" shape 0 1 50mbit
check "degrade to 50mbit: host 0 egress follows" iperf_in 0 1 1 2 50
check "degrade to 50mbit: switch egress toward host 0 follows" iperf_in 1 0 1 2 50
"$NB" restore 0 1
check "restore puts the configured rate back on both ends" tbf_rate_is 0 1 "${RATE_MBIT}Mbit"

# Degrade while a 4 s transfer runs: 2 s at 200 and 2 s at 50 average ~125 (allow 90..155).
live_out=$(mktemp)
"$NB" iperf 0 1 2 4 >"$live_out" &
live_pid=$!
sleep 2
"$NB" shape 0 2 50mbit
wait "$live_pid" || true
live=$(cat "$live_out")
rm -f "$live_out"
echo "    4 s transfer on rail 2, degraded to 50mbit after 2 s: ${live:-none} Mbit/s"
check "degrade while traffic runs takes effect mid-transfer" in_band "${live:-0}" 90 155
"$NB" restore 0 2

"$NB" cut 0 3
check "cut: host 0 -> host 1 on the rail fails" ping_fails 0 1 3
check "cut: host 1 -> host 0 on the rail fails" ping_fails 1 0 3
check "cut: host NIC has no carrier" no_carrier 0 3
check "cut: other rails unaffected" ping_ok 0 1 2
"$NB" restore 0 3
check "restore after cut: carrier back" has_carrier 0 3
check "restore after cut: ping works at once" restored 3

# Cut while a 5 s transfer runs, restore 1 s later: the transfer stalls, then resumes over the same
# connection. 1 s at 200 before and ~3 s after the outage make ~150; a transfer that never
# stalled would make ~190, one that never resumed ~40 (allow 60..175).
live_out=$(mktemp)
"$NB" iperf 0 1 3 5 >"$live_out" &
live_pid=$!
sleep 1
"$NB" cut 0 3
sleep 1
"$NB" restore 0 3
wait "$live_pid" || true
live=$(cat "$live_out")
rm -f "$live_out"
echo "    5 s transfer on rail 3, cut after 1 s, restored 1 s later: ${live:-none} Mbit/s"
check "cut and restore while traffic runs: the transfer stalls and resumes" in_band "${live:-0}" 60 175

# Reset while a 4 s transfer runs on rail 1: the transfer's connection fails, and the rule is
# gone when reset returns, so a new transfer on the rail runs at the rate at once.
live_out=$(mktemp)
"$NB" iperf 0 1 1 4 >"$live_out" 2>&1 &
live_pid=$!
sleep 1
reset_out=$("$NB" reset 0 1)
echo "    $reset_out"
live_rc=0
wait "$live_pid" || live_rc=$?
echo "    4 s transfer on rail 1, reset after 1 s: $(tail -n 1 "$live_out") (exit $live_rc)"
rm -f "$live_out"
check "reset: the host's segments on the rail were answered with resets" has '^reset: [1-9]' echo "$reset_out"
check "reset: the transfer running on the rail fails" test "$live_rc" -ne 0
check "reset: undone when it returns, a new transfer runs at the rate" iperf_in 0 1 1 2 "$RATE_MBIT"

"$NB" cut 1 0 --admin
check "cut --admin: rail route removed" no_route 1 0
check "cut --admin: ping fails" ping_fails 1 0 0
"$NB" restore 1 0
check "restore after cut --admin: route re-added" has_route 1 0
check "restore after cut --admin: ping works at once" restored 0

"$NB" blackhole 1 2
check "blackhole: host 0 -> host 1 on the rail fails" ping_fails 0 1 2
check "blackhole: host 1 -> host 0 on the rail fails" ping_fails 1 0 2
check "blackhole: link still UP with carrier" link_up 1 2
check "blackhole: status shows it" status_has 'blackhole\(drops [1-9]'
"$NB" restore 1 2
check "restore after blackhole: ping works at once" restored 2
check "status after restores: every NIC ok" all_ok

all_out=$("$NB" iperf-all 0 1 2 || true)
printf '    %s\n' "${all_out//$'\n'/$'\n'    }"
total=$(echo "$all_out" | awk '/^total:/ { print $2 }')
check "iperf-all: 4 parallel rails total 85%..105% of 4x rate" \
  in_band "${total:-0}" $((RATE_MBIT * RAILS * 85 / 100)) $((RATE_MBIT * RAILS * 105 / 100))

t0=$SECONDS
check "down" "$NB" down
check "down leaves no namespace, bridge, veth or state file ($((SECONDS - t0)) s)" nothing_left
check "down again is a no-op" "$NB" down

# A partial fabric (as a failed or interrupted up leaves) is torn down from the names alone.
ip netns add "${P}sw" && ip netns add "${P}h0" && ip -n "${P}sw" link add "${P}br0" type bridge
"$NB" down >/dev/null || true
check "down after a partial up" nothing_left

echo "netbed selftest: $pass passed, $fail failed ($((SECONDS - t_start)) s)"
[ "$fail" -eq 0 ]
