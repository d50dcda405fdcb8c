#!/usr/bin/env bash
# braid-perf --traffic-class N (issue 32 item 4): NCCL's per-communicator trafficClass reaches
# the net plugin through the ABI versions that carry it (v10: each connect's config; v11, v12:
# init's) and braid marks every data socket of the run with it, on both ends of each
# connection; the kernel says so (ss --tos: IP TOS, or the IPv6 traffic class).  Without the
# option, or through v9 (which carries none), nothing is marked; a value braid cannot apply is
# refused.  Loopback, about 20 s.
#   BUILD=build tools/perf/test/tclass_test.sh      (PERF=..., PLUGIN=... to try others)
# Prints "tclass: N passed, N failed" (no ss with --tos: "tclass: skipped (...)", exit 77).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 2
B=${BUILD:-build}
PERF=${PERF:-$B/braid-perf}
PLUGIN=${PLUGIN:-$(realpath "$B/libnccl-net-braid.so")}
export BRAID_SOCKET_IFNAME=lo BRAID_TRANSPORT=socket NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
unset BRAID_SOCKET_FAMILY
if ! ss -tnpH --tos >/dev/null 2>&1; then echo "tclass: skipped (no ss with --tos: iproute2)"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; kill $(jobs -p) 2>/dev/null' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; grep -v "NCCL INFO" "$tmp/out" | tail -n 8 | sed 's/^/     /'; }

# The process and everything under it.
tree() { local p=$1 c; echo "$p"; for c in $(ps -o pid= --ppid "$p"); do tree "$c"; done; }

# The established TCP sockets of processes PIDS...: "local peer class" per line (addresses
# without the %device ss appends; class in decimal: IPv6 sockets' traffic class, else IP TOS).
sockets() {
  local pids=" $* "
  ss -tnpH --tos | awk -v pids="$pids" '
  function hex(s,   v, i) { v = 0; sub(/^0x/, "", s); for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
  {
    pid = ""; if (match($0, /pid=[0-9]+/)) pid = substr($0, RSTART + 4, RLENGTH - 4)
    if (pid == "" || index(pids, " " pid " ") == 0) next
    local = $4; sub(/%[^:\]]*/, "", local)
    cls = "0"
    if (match($0, /tclass:0x[0-9a-f]+/)) cls = substr($0, RSTART + 7, RLENGTH - 7)
    else if (match($0, /tos:0x[0-9a-f]+/)) cls = substr($0, RSTART + 4, RLENGTH - 4)
    printf "%s %s %d\n", local, $5, hex(cls)
  }'
}

# run ARGS...: a verified two-rank sendrecv in the background; once its connections are up (its
# table header is printed) the sockets of its ranks go to $tmp/socks.  Sets rc.
run() {
  rc=0
  : >"$tmp/socks"
  timeout 120 "$PERF" sendrecv -n 2 -b 8M -e 8M -w 1 -i 300 -c 2 --plugin "$PLUGIN" --timeout 30 "$@" \
    >"$tmp/out" 2>&1 &
  local p=$! n
  for _ in $(seq 600); do
    grep -q "(elements)" "$tmp/out" && break
    kill -0 $p 2>/dev/null || break
    sleep 0.05
  done
  for _ in 1 2 3 4 5; do # the busiest moment of a loaded machine can hide a socket from one read
    sockets $(tree $p) >"$tmp/s"
    n=$(wc -l <"$tmp/s")
    [ "$n" -gt "$(wc -l <"$tmp/socks")" ] && cp "$tmp/s" "$tmp/socks"
    sleep 0.1
  done
  wait $p || rc=$?
}

# marked WANT: every socket of the run in class WANT has its peer (the other end of the
# connection, a socket of the run too) in WANT; at least 8 are (2 ranks x 2 channels, each
# connection's 2 ends), and no other socket is but the rendezvous pair braid-perf itself opens.
marked() {
  awk -v want="$1" '
    { cls[$1 " " $2] = $3; n++ }
    END {
      for (k in cls) {
        split(k, a, " ")
        if (cls[k] == want) { m++; if (cls[a[2] " " a[1]] != want) { print "unpaired " k " (peer: " cls[a[2] " " a[1]] ")"; bad = 1 } }
      }
      if (m < 8) { print m + 0 " of " n + 0 " sockets in class " want; bad = 1 }
      if (n - m > 2) { print n - m " sockets outside class " want; bad = 1 }
      exit bad
    }' "$tmp/socks" >"$tmp/why"
}
# unmarked: the run has its connections (at least 10 sockets) and none is in a class.
unmarked() {
  awk '$3 != 0 { print "in class " $3 ": " $0; bad = 1 } END { if (NR < 10) { print NR " sockets"; bad = 1 }; exit bad }' \
    "$tmp/socks" >"$tmp/why"
}
verified() { [ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/out"; }

# case NAME VERSION-ARGS...: the class 104 (0x68: DSCP 26) on both ends of every connection.
case_marked() {
  local name=$1 says=$2; shift 2
  run --traffic-class 104 "$@"
  if ! verified; then bad "$name (exit $rc or wrong results)"
  elif ! marked 104; then bad "$name: $(head -n 3 "$tmp/why" | tr '\n' ';')"
  elif ! grep -q "trafficClass 104 ($says)" "$tmp/out"; then bad "$name (header: no \"trafficClass 104 ($says)\")"
  elif ! grep -q "traffic class 104 (0x68, NCCL's trafficClass)" "$tmp/out"; then bad "$name (the plugin did not announce the class)"
  else ok "$name: $(awk '$3 == 104' "$tmp/socks" | wc -l) sockets in class 0x68, in pairs"; fi
}
case_marked "v12: init's config marks both ends" "init's config"
case_marked "v11: init's config marks both ends" "init's config" --net-version 11
case_marked "v10: each connect's config marks both ends" "each connect's config" --net-version 10
BRAID_SOCKET_FAMILY=AF_INET6 case_marked "IPv6 (traffic class), v12" "init's config"

run
if ! verified; then bad "no --traffic-class (exit $rc or wrong results)"
elif ! unmarked; then bad "no --traffic-class: $(head -n 3 "$tmp/why" | tr '\n' ';')"
elif grep -q "traffic class" "$tmp/out"; then bad "no --traffic-class: the plugin announced a class"
else ok "no --traffic-class: every socket in the default class"; fi

run --traffic-class -1
if verified && unmarked; then ok "--traffic-class -1 (undefined): the default"
else bad "--traffic-class -1 (exit $rc): $(head -n 3 "$tmp/why" | tr '\n' ';')"; fi

run --traffic-class 104 --net-version 9
if ! verified; then bad "v9 (exit $rc or wrong results)"
elif ! unmarked; then bad "v9: $(head -n 3 "$tmp/why" | tr '\n' ';')"
elif ! grep -q "trafficClass 104 NOT passed: ncclNetPlugin_v7..v9 carry no traffic class" "$tmp/out"; then
  bad "v9: the header does not say the class was not passed"
else ok "v9 carries no class: braid-perf says so, nothing is marked"; fi

rc=0
timeout 60 "$PERF" sendrecv -n 2 -b 8 -e 8 -w 0 -i 1 --plugin "$PLUGIN" --timeout 20 --traffic-class 300 \
  >"$tmp/out" 2>&1 || rc=$?
if [ $rc -eq 2 ] && grep -q "init: NCCL's trafficClass 300 (ncclConfig_t) is not a traffic class braid can apply" "$tmp/out"; then
  ok "300 is refused at init with the reason"
else bad "300 (exit $rc, want 2 and the WARN)"; fi

"$PERF" --help >"$tmp/out" 2>&1 # (into a file: grep -q closing a pipe early fails the pipeline)
if grep -q -- "--traffic-class N" "$tmp/out"; then ok "--help lists --traffic-class"
else bad "--help lacks --traffic-class"; fi

echo "tclass: $pass passed, $fail failed"
[ $fail -eq 0 ]
