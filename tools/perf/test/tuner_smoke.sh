#!/bin/sh
# braid-perf --calibrate and --algo auto|nccl smoke, 3 local ranks over loopback, tiny sizes:
#  - --calibrate writes a calibration file (atomically) that the braid tuner loads without a
#    warning (braid_calib_load semantics, through the tuner itself);
#  - --algo auto (through libnccl-tuner-braid.so, with that file) and --algo nccl verify every
#    result, and each row names what ran and NCCL's pick; a tuner rule's channel count is used;
#  - ranks whose tuner inputs or choices differ stop before any collective, all with status 2;
#  - bad combinations are refused;
#  - with build/braid-ps: CollNet is calibrated and offered too (TUNER_SMOKE_COLLNET=0 skips).
# Exits non-zero on any failure.   BUILD=build tools/perf/test/tuner_smoke.sh
set -u
B=${BUILD:-build}
PERF=$B/braid-perf
BDIR=$(cd "$B" && pwd)
export NCCL_NET_PLUGIN=$BDIR/libnccl-net-braid.so
export NCCL_TUNER_PLUGIN=$BDIR/libnccl-tuner-braid.so
export BRAID_SOCKET_IFNAME=${BRAID_SOCKET_IFNAME:-lo}
unset BRAID_PS_SERVERS NCCL_COLLNET_ENABLE BRAID_TUNER_CALIB BRAID_TUNER_HEALTH BRAID_TUNER_MODE BRAID_TUNER_PIN \
      NCCL_TUNER_CONFIG_FILE NCCL_ALGO NCCL_PROTO
[ -x "$PERF" ] && [ -f "$NCCL_NET_PLUGIN" ] && [ -f "$NCCL_TUNER_PLUGIN" ] ||
  { echo "FAIL: build $PERF, $NCCL_NET_PLUGIN and $NCCL_TUNER_PLUGIN first"; exit 1; }
tmp=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fail=0
SIZES="-n 3 -b 4K -e 256K -f 8 --iters 3 -w 1 --timeout 60"
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && tail -15 "$2"; fail=1; }

# run NAME [VAR=value...] ARGS...: must exit 0; output in $tmp/NAME
run() {
  name=$1
  shift
  envs=
  while case ${1:-} in *=*) true ;; *) false ;; esac do envs="$envs $1"; shift; done
  if env $envs "$PERF" "$@" >"$tmp/$name" 2>&1; then ok "$name:$envs $*"
  else bad "$name:$envs $* (exit $?)" "$tmp/$name"; return 1; fi
}

# refuse PATTERN [VAR=value...] ARGS...: must exit 2 with PATTERN in the output
refuse() {
  pat=$1
  shift
  envs=
  while case ${1:-} in *=*) true ;; *) false ;; esac do envs="$envs $1"; shift; done
  env $envs "$PERF" "$@" >"$tmp/refused" 2>&1
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q "$pat" "$tmp/refused"; then ok "refused:$envs $* ($pat)"
  else bad "refused:$envs $* (wanted exit 2 and \"$pat\", got exit $rc)" "$tmp/refused"; fi
}

# check_calib FILE NPOINTS LINK_GBS: the header and every point line of a calibration file.
check_calib() {
  f=$1
  if [ -f "$f.tmp" ]; then bad "$f.tmp left behind"; return; fi
  head_ok=$(awk -v n=3 -v gbs="$3" '
    /^#/ || NF == 0 { next }
    !magic { magic = ($0 == "braid-calibration 1"); if (!magic) exit; next }
    $1 == "nranks" { nr = $2; next }
    $1 == "nnodes" { nn = $2; next }
    $1 == "link_gbs" { link = $2 > 0; next }
    $1 == "model_link_gbs" { mg = $2; next }
    $1 == "model_nchannels" { mc = $2; next }
    NF == 6 && $1 == "allreduce" && $4 ~ /^[0-9]+$/ && $5 > 0 && $6 > 0 { pts++; next }
    { badline = 1 }
    END { print (magic && nr == n && nn == n && link && mg == gbs && mc == 2 && !badline) ? pts : -1 }' "$f")
  if [ "$head_ok" = "$2" ]; then ok "$f: header and $2 points"
  else bad "$f: header or points wrong (points: $head_ok, wanted $2)" "$f"; fi
}

# 1. Calibrate: ring and tree x 3 protocols x 3 sizes, 3 interleaved repeats.
cal=$tmp/calib.txt
if run calibrate $SIZES --calibrate "$cal" --link-gbs 3; then
  check_calib "$cal" 18 3
  grep -q "calibration summary" "$tmp/calibrate" && grep -q "^# wrote $cal: 18 points" "$tmp/calibrate" &&
    grep -q "median of 3 interleaved repeats" "$tmp/calibrate" || bad "calibrate: summary lines" "$tmp/calibrate"
fi
[ -f "$cal" ] || { echo "FAIL: no calibration file, stopping"; exit 1; }

# pin_of VAR=value...: the BRAID_TUNER_PIN that lets the tuner use those files (braid-tune pin).
pin_of() { env "$@" "$B/braid-tune" pin 2>/dev/null | sed -n 's/^BRAID_TUNER_PIN=//p'; }
calpin=$(pin_of BRAID_TUNER_CALIB="$cal")

# 2. The tuner loads it (braid_calib_load) without a warning; --algo auto uses it, once pinned.
if run auto BRAID_TUNER_CALIB="$cal" BRAID_TUNER_PIN="$calpin" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING,INIT \
       allreduce --algo auto $SIZES; then
  if grep -q "tuner: model on: calibration $cal" "$tmp/auto" && ! grep -q "WARN" "$tmp/auto"; then
    ok "auto: the tuner loaded the calibration without a warning"
  else bad "auto: the tuner did not use the calibration cleanly" "$tmp/auto"; fi
  rows=$(grep -c '^ .* (nccl: [a-z_]*/[a-z0-9]*)$' "$tmp/auto")
  [ "$rows" = 3 ] && ok "auto: 3 rows name the choice and NCCL's pick" || bad "auto: rows ($rows)" "$tmp/auto"
  grep -q "3 nodes x 3 GB/s over 2 channels (from $cal)" "$tmp/auto" &&
    ok "auto: NCCL's model takes the calibration's fabric" || bad "auto: model fabric" "$tmp/auto"
fi

# 2b. Unpinned, the calibration is left out (nothing shows every rank has the same file).
if run unpinned BRAID_TUNER_CALIB="$cal" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING,INIT \
       allreduce --algo auto $SIZES; then
  grep -q "calibration $cal not used, NCCL's choice kept: without BRAID_TUNER_PIN" "$tmp/unpinned" &&
    grep -q "BRAID_TUNER_PIN=$calpin on every rank" "$tmp/unpinned" && ! grep -q "model on" "$tmp/unpinned" &&
    ok "unpinned: the calibration is left out, with the pin to set" || bad "unpinned: not said" "$tmp/unpinned"
fi

# 3. --algo nccl: NCCL's own pick on every row.
if run nccl BRAID_TUNER_CALIB="$cal" --algo nccl $SIZES; then
  same=$(sed -n 's/^ .*  \([a-z_]*\/[a-z0-9]*\) (nccl: \([a-z_]*\/[a-z0-9]*\))$/\1 \2/p' "$tmp/nccl" |
         awk '$1 == $2 { s++ } END { print s + 0 }')
  [ "$same" = 3 ] && ok "nccl: every row runs NCCL's pick" || bad "nccl: rows ($same of 3)" "$tmp/nccl"
fi

# 4. A tuner rule's channel count: 4 channels are connected and used (--channels 2).
printf 'allreduce,0,1000000,tree,simple,4,-1,-1\n' >"$tmp/rules.csv"
if run rules NCCL_TUNER_CONFIG_FILE="$tmp/rules.csv" BRAID_TUNER_PIN="$(pin_of NCCL_TUNER_CONFIG_FILE="$tmp/rules.csv")" --algo auto $SIZES --json "$tmp/rules.json"; then
  [ "$(grep -c 'tree/simple 4ch (nccl: ' "$tmp/rules")" = 3 ] &&
    [ "$(grep -c '"channels": 4' "$tmp/rules.json")" = 3 ] &&
    ok "rules: the tuner's tree/simple on 4 channels ran" || bad "rules: channels" "$tmp/rules"
fi

# 5. Ranks that differ stop before any collective, every one with status 2.
# pair NAME PATTERN ENV-FOR-RANK-2...
pair() {
  name=$1 pat=$2
  shift 2
  port=$((21000 + $(od -An -N2 -tu2 /dev/urandom) % 20000))
  args="allreduce --algo auto -b 4K -e 64K -f 4 --iters 2 -w 1 --timeout 30 --nranks 3 --rendezvous 127.0.0.1:$port"
  "$PERF" $args --rank 0 >"$tmp/$name.0" 2>&1 & p0=$!
  "$PERF" $args --rank 1 >"$tmp/$name.1" 2>&1 & p1=$!
  env "$@" "$PERF" $args --rank 2 >"$tmp/$name.2" 2>&1
  r2=$?
  wait $p0; r0=$?
  wait $p1; r1=$?
  if [ $r0 = 2 ] && [ $r1 = 2 ] && [ $r2 = 2 ] && grep -q "$pat" "$tmp/$name.0" &&
     ! grep -q '^ *[0-9]' "$tmp/$name.0"; then ok "$name: every rank stops ($pat)"
  else bad "$name: exits $r0 $r1 $r2" "$tmp/$name.0"; fi
}
pair differ-inputs "tuning inputs differ" BRAID_TUNER_CALIB="$cal" BRAID_TUNER_PIN="$calpin"
pair differ-choice "choose differently" NCCL_PROTO=LL128

# 6. Refusals.
refuse "allreduce only" sendrecv --algo auto -n 2
refuse "allreduce only" allgather --calibrate "$tmp/x" -n 2
refuse "drop --algo" --calibrate "$tmp/x" --algo tree -n 2
refuse "drop --proto" --calibrate "$tmp/x" --proto LL -n 2
refuse "needs 2 or more ranks" --calibrate "$tmp/x" -n 1
refuse "cannot load the tuner plugin" NCCL_TUNER_PLUGIN=no-such-tuner --algo auto -n 2 -b 1K -e 1K
[ -e "$tmp/x" ] && bad "a refused --calibrate wrote its file"

# 7. CollNet through two braid-ps servers: calibrated, and offered to the tuner.
if [ "${TUNER_SMOKE_COLLNET:-1}" != 0 ] && [ -x "$B/braid-ps" ]; then
  export BRAID_PS_TOKEN=tuner-smoke-$$-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
  list=""
  for i in 0 1; do
    for _ in 1 2 3 4 5; do
      port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 30000))
      "$B/braid-ps" --listen "127.0.0.1:$port" --threads 1 >"$tmp/ps$i.log" 2>&1 &
      pid=$!
      for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        grep -q listening "$tmp/ps$i.log" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
      done
      if kill -0 $pid 2>/dev/null && grep -q listening "$tmp/ps$i.log" 2>/dev/null; then
        pids="$pids $pid"; list="$list${list:+,}127.0.0.1:$port"; break
      fi
      kill $pid 2>/dev/null
    done
  done
  export BRAID_PS_SERVERS=$list
  cal2=$tmp/calib-collnet.txt
  if run cn-calibrate $SIZES --calibrate "$cal2" --link-gbs 3; then
    check_calib "$cal2" 21 3
    [ "$(grep -c '^allreduce collnet_chain simple ' "$cal2")" = 3 ] &&
      ok "cn-calibrate: CollNet measured" || bad "cn-calibrate: no CollNet points" "$cal2"
  fi
  if run cn-nccl --algo nccl $SIZES; then
    grep -q "CollNet offered" "$tmp/cn-nccl" && ok "cn-nccl: CollNet offered to NCCL's model" ||
      bad "cn-nccl: CollNet not offered" "$tmp/cn-nccl"
  fi
  run cn-auto BRAID_TUNER_CALIB="$cal2" BRAID_TUNER_PIN="$(pin_of BRAID_TUNER_CALIB="$cal2")" --algo auto $SIZES
  if run cn-missing NCCL_COLLNET_ENABLE=1 BRAID_PS_SERVERS= --algo nccl $SIZES; then
    grep -q "CollNet unavailable (see the messages above): going on without it" "$tmp/cn-missing" &&
      ok "cn-missing: goes on without CollNet" || bad "cn-missing: no note" "$tmp/cn-missing"
  fi
  unset BRAID_PS_SERVERS
else
  echo "skip CollNet (no $B/braid-ps, or TUNER_SMOKE_COLLNET=0)"
fi

# 8. Plain runs are unchanged: one row per size, the protocol in the last column.
if run plain allreduce --algo ring $SIZES; then
  [ "$(grep -c '^ .*  \(LL\|LL128\|Simple\)$' "$tmp/plain")" = 3 ] && ok "plain: rows as before" ||
    bad "plain: rows" "$tmp/plain"
fi
exit $fail
