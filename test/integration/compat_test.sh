#!/usr/bin/env bash
# Which NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN values load braid under each NCCL version 2.19..2.30,
# through which ABI, checked row by row with braid-nccl-compat (which opens plugins by each
# version's own rules, tools/compat/profile.c), then printed as the README's compatibility table;
# the README's copy must be identical (a hand edit fails here).  Then tuner rank agreement: ranks
# in separate processes with different local files and health inputs either answer every call of
# a sweep identically or refuse at init, under tuner ABI v1 (2.19), v2 (2.21) and v6 (2.30).
#   test/integration/compat_test.sh BUILD_DIR [--print]   (--print: only print the table)
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(realpath "${1:-build}")
COMPAT=$B/braid-nccl-compat
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
# With --print only the table goes to stdout.
if [ "${2:-}" = --print ]; then exec 3>&2; else exec 3>&1; fi
ok() { pass=$((pass + 1)); echo "ok   $1" >&3; }
bad() { fail=$((fail + 1)); echo "FAIL $1" >&3; [ -n "${2:-}" ] && sed 's/^/     /' "$2" | tail -n 20 >&3; }
unset NCCL_NET_PLUGIN NCCL_TUNER_PLUGIN NCCL_TUNER_CONFIG_FILE BRAID_TUNER_PIN BRAID_TUNER_MODE \
      BRAID_TUNER_CALIB BRAID_TUNER_HEALTH NCCL_ALGO NCCL_PROTO NCCL_DEBUG
# The plugins are found as a user installs them: on the loader's path.
export LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NETPATH=$B/libnccl-net-braid.so TUNERPATH=$B/libnccl-tuner-braid.so

# load VERSION NET TUNER: braid-nccl-compat's two lines (net:, tuner:).
load() { NCCL_NET_PLUGIN=$2 NCCL_TUNER_PLUGIN=$3 "$COMPAT" load --nccl "$1" | grep -E '^(net|tuner):'; }
# api LINE PREFIX: the vN of "PREFIX_vN" in a loaded line, else "-".
api() { case $1 in *" loaded "*) sed -n "s/.*$2_\(v[0-9]*\).*/\1/p" <<<"$1" | head -n 1 ;; *) echo - ;; esac; }

# What NCCL's source says each version does (see tools/compat/profile.c for where):
#   version  net-api tuner-api  NCCL_NET_PLUGIN=path  NCCL_TUNER_PLUGIN=braid  NCCL_TUNER_PLUGIN=path
want=(
  "2.19          v7  v1 no  no  yes"
  "2.20          v8  v1 no  no  yes"
  "2.21          v8  v2 yes yes yes"
  "2.22-2.23     v8  v3 yes yes yes"
  "2.24-2.25     v9  v4 yes yes yes"
  "2.26          v10 v4 yes yes yes"
  "2.27.3        v10 v4 no  yes no"
  "2.27.5-2.27.7 v10 v4 yes yes yes"
  "2.28-2.29     v11 v5 yes yes yes"
  "2.30          v12 v6 yes yes yes"
)
table=$tmp/table.md
{
  echo "| NCCL | \`NCCL_NET_PLUGIN\` | \`NCCL_TUNER_PLUGIN\` | net, CollNet ABI | tuner ABI |"
  echo "| --- | --- | --- | --- | --- |"
} >"$table"
yn() { [ "$1" = "$2" ] && echo yes || echo no; }
for row in "${want[@]}"; do
  read -r v wnet wtun wpath wbare wtpath <<<"$row"
  ver=${v%%-*}
  bare=$(load "$ver" braid braid) path=$(load "$ver" "$NETPATH" "$TUNERPATH")
  named=$(load "$ver" braid libnccl-tuner-braid.so) tpath=$(load "$ver" braid "$TUNERPATH")
  netb=$(api "$(grep ^net: <<<"$bare")" ncclNetPlugin) collb=$(api "$(grep ^net: <<<"$bare")" ncclCollNetPlugin)
  netp=$(api "$(grep ^net: <<<"$path")" ncclNetPlugin)
  tunb=$(api "$(grep ^tuner: <<<"$bare")" ncclTunerPlugin) tunp=$(api "$(grep ^tuner: <<<"$tpath")" ncclTunerPlugin)
  tunn=$(api "$(grep ^tuner: <<<"$named")" ncclTunerPlugin)
  printf '%s\n%s\n%s\n%s\n' "$bare" "$path" "$named" "$tpath" >"$tmp/load.$v"
  got_path=$(yn "$netp" "$wnet") got_bare=$(yn "$tunb" "$wtun") got_tpath=$(yn "$tunp" "$wtun")
  if [ "$netb" = "$wnet" ] && [ "$collb" = "$wnet" ] && [ "$got_path" = "$wpath" ] &&
     [ "$tunn" = "$wtun" ] && [ "$got_bare" = "$wbare" ] && [ "$got_tpath" = "$wtpath" ]; then
    ok "NCCL $v: net $wnet (by name; by path: $wpath), CollNet $wnet, tuner $wtun (by file name; as braid: $wbare; by path: $wtpath)"
  else
    bad "NCCL $v: want net $wnet path=$wpath tuner $wtun braid=$wbare path=$wtpath; got net $netb/$collb path=$got_path($netp) tuner $tunn braid=$got_bare($tunb) path=$got_tpath($tunp)" "$tmp/load.$v"
  fi
  netcol=$([ "$wpath" = yes ] && echo '`braid` or the path' || echo '`braid` (a path fails)')
  tuncol='`libnccl-tuner-braid.so`'
  [ "$wbare" = yes ] && tuncol="\`braid\`, $tuncol"
  [ "$wtpath" = yes ] && tuncol="$tuncol or the path"
  [ "$wbare" = no ] && tuncol="$tuncol (\`braid\` fails)"
  [ "$wtpath" = no ] && tuncol="$tuncol (a path fails)"
  echo "| $v | $netcol | $tuncol | $wnet, $wnet | $wtun |" >>"$table"
done
if [ "${2:-}" = --print ]; then cat "$table"; [ "$fail" -eq 0 ]; exit; fi

# The README carries this table verbatim between its markers.
awk '/^<!-- compat-table begin/ {on = 1; next} /^<!-- compat-table end/ {on = 0} on' README.md >"$tmp/readme.md"
if diff -u "$tmp/readme.md" "$table" >"$tmp/diff"; then ok "the README's compatibility table is the one this test checked"
else bad "the README's compatibility table differs from the checked one (test/integration/compat_test.sh $1 --print)" "$tmp/diff"; fi

# ---- Rank agreement: ranks with different local files and health inputs. ----
mk() { printf '%s\n' "$2" >"$tmp/$1"; }
mk rules.a "allreduce,0,65536,tree,ll,-1,-1,-1"
mk rules.b "allreduce,0,65536,ring,simple,-1,-1,-1"
mk health.a "h0 1.0"
mk health.b "h1 0.25"
cp "$tmp/rules.a" "$tmp/rules.a2"
# sweep NAME VERSION [VAR=value...]: one rank's answers in $tmp/NAME (exit status in $tmp/NAME.rc).
sweep() {
  local name=$1 ver=$2; shift 2
  (cd "$tmp" && env NCCL_NET_PLUGIN=braid NCCL_TUNER_PLUGIN=libnccl-tuner-braid.so "$@" "$COMPAT" sweep --nccl "$ver" \
     --nranks 16 --nnodes 2 >"$tmp/$name" 2>"$tmp/$name.err"; echo $? >"$tmp/$name.rc")
}
answers() { grep '^coll ' "$tmp/$1"; }
fp_of() { # the fingerprint a rank with these files computes, from the tuner's own WARN
  sweep fp 2.30 "$@"
  sed -n 's/.*BRAID_TUNER_PIN=\([0-9a-f]\{16\}\) on every rank.*/\1/p' "$tmp/fp.err" | head -n 1
}
pin=$(fp_of NCCL_TUNER_CONFIG_FILE="$tmp/rules.a")
[ -n "$pin" ] && ok "an unpinned rules file: the tuner names the BRAID_TUNER_PIN to set ($pin)" ||
  bad "an unpinned rules file: no BRAID_TUNER_PIN in the WARN" "$tmp/fp.err"
for ver in 2.19 2.21 2.30; do
  # No pin: every rank keeps NCCL's choice, whatever its files say.
  sweep u1 $ver NCCL_TUNER_CONFIG_FILE="$tmp/rules.a" BRAID_TUNER_HEALTH="$tmp/health.a"
  sweep u2 $ver NCCL_TUNER_CONFIG_FILE="$tmp/rules.b" BRAID_TUNER_HEALTH="$tmp/health.b"
  sweep u3 $ver
  sweep off $ver BRAID_TUNER_MODE=off
  if [ "$(cat "$tmp/u1.rc" "$tmp/u2.rc" "$tmp/u3.rc")" = "$(printf '0\n0\n0')" ] &&
     [ "$(answers u1)" = "$(answers off)" ] && [ "$(answers u2)" = "$(answers off)" ] &&
     [ "$(answers u3)" = "$(answers off)" ] && [ "$(answers u1 | wc -l)" -eq 80 ]; then
    ok "NCCL $ver: 3 ranks, different unpinned rules and health files: 80 identical answers each (NCCL's)"
  else bad "NCCL $ver: unpinned ranks diverged or failed" "$tmp/u1.err"; fi
  # Pinned: the same contents under another path agree and the rules act; other files refuse.
  sweep p1 $ver NCCL_TUNER_CONFIG_FILE="$tmp/rules.a" BRAID_TUNER_PIN="$pin"
  sweep p2 $ver NCCL_TUNER_CONFIG_FILE="$tmp/rules.a2" BRAID_TUNER_PIN="$pin"
  sweep p3 $ver NCCL_TUNER_CONFIG_FILE="$tmp/rules.b" BRAID_TUNER_PIN="$pin"
  sweep p4 $ver BRAID_TUNER_PIN="$pin"
  sweep p5 $ver NCCL_TUNER_CONFIG_FILE="$tmp/rules.a" BRAID_TUNER_PIN=xyz
  if [ "$(cat "$tmp/p1.rc" "$tmp/p2.rc")" = "$(printf '0\n0')" ] &&
     [ "$(answers p1)" = "$(answers p2)" ] && [ "$(answers p1)" != "$(answers off)" ]; then
    ok "NCCL $ver: pinned ranks with the same rules under two paths: identical answers, the rules acting"
  else bad "NCCL $ver: pinned ranks with the same rules disagree, or the rules did nothing" "$tmp/p2.err"; fi
  for r in p3 p4 p5; do
    if [ "$(cat "$tmp/$r.rc")" = 3 ] && grep -q "refusing this communicator" "$tmp/$r.err" &&
       ! grep -q '^coll ' "$tmp/$r"; then :
    else bad "NCCL $ver: $r (other file, no file or a bad pin) was not refused at init" "$tmp/$r.err"; continue 2; fi
  done
  ok "NCCL $ver: a rank whose files differ from the pin, or lack them, or has a bad pin: init refused with the reason"
done

echo "compat: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
