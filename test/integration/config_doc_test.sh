#!/usr/bin/env bash
# docs/configuration.md against the code (suite config-doc):
#   (1) its generated section is what braid-config-doc makes of common/params.def and
#       common/env.def now (else: run make config-doc);
#   (2) every BRAID_* variable the code reads is in it: the registry's, the C sources' string
#       literals (getenv and the like; in test/ only getenv's) and the expansions of a BRAID_*
#       variable in every shell script;
#   (3) every BRAID_* name it mentions is a variable of params.def or env.def (no stale names).
#   test/integration/config_doc_test.sh BUILD_DIR
# Prints "config-doc: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
DOC=docs/configuration.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# (1)
if ! "$B/braid-config-doc" "$DOC" >"$tmp/doc"; then
  bad "generated section (braid-config-doc failed)"
elif ! diff -u "$DOC" "$tmp/doc" >"$tmp/diff"; then
  bad "generated section: $DOC differs from common/params.def and common/env.def; run make config-doc"
  head -n 40 "$tmp/diff" | sed 's/^/     /'
else ok "generated section matches params.def and env.def"; fi

# (2)
known() { sed -n "s/^$1(\([A-Z0-9_]*\),.*/BRAID_\1/p" "common/$2"; }
{ known BRAID_PARAM params.def; known BRAID_ENV env.def; } | sort -u >"$tmp/known"
src=(common net_plugin ps_offload tuner_plugin tools bench include)
{
  known BRAID_PARAM params.def
  grep -rhoE --include='*.c' --include='*.h' --include='*.cc' '"BRAID_[A-Z0-9_]*[A-Z0-9]"' "${src[@]}" | tr -d '"'
  grep -rhoE --include='*.c' --include='*.h' --include='*.cc' 'getenv\("BRAID_[A-Z0-9_]+"' test | sed 's/.*"\(.*\)"/\1/'
  find . -path ./build -prune -o -path ./.git -prune -o -type f -name '*.sh' -print0 |
    xargs -0 grep -hoE '\$\{?BRAID_[A-Z0-9_]+' | tr -d '${'
} | sort -u >"$tmp/read"
missing=$(while read -r v; do grep -q "\`$v\`" "$DOC" || echo "$v"; done <"$tmp/read")
if [ -z "$missing" ]; then ok "every BRAID_* variable the code reads is documented ($(wc -l <"$tmp/read") variables)"
else bad "read by the code but in neither common/params.def nor common/env.def: $(echo $missing)"; fi

# (3)
stale=$(grep -oE 'BRAID_[A-Z0-9_]*[A-Z0-9]' "$DOC" | sort -u | comm -23 - "$tmp/known")
if [ -z "$stale" ]; then ok "every BRAID_* name in $DOC is a variable"
else bad "$DOC names what is no variable: $(echo $stale)"; fi

echo "config-doc: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
