#!/usr/bin/env bash
# Checks that every path into this tree that a source comment, script, build file or document
# names (net_plugin/..., common/..., tools/..., test/..., bench/..., docs/..., ...) exists, so
# that text naming files that were moved or removed fails `make test` instead of misleading.
# Paths ending in "/" must be folders; <placeholders>, globs and build outputs are skipped.
# The files read are those git tracks; in a copy of the tree without git (or not a checkout),
# every such file but build/, bench/results/ and .git/.
#   tools/check/paths.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
sources() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -- '*.c' '*.h' '*.cc' '*.sh' '*.mk' '*.md' Makefile .ci/run
  else
    find . \( -path ./build -o -path ./bench/results -o -path ./.git \) -prune -o -type f \
      \( -name '*.[ch]' -o -name '*.cc' -o -name '*.sh' -o -name '*.mk' -o -name '*.md' -o -path ./Makefile \
         -o -path ./.ci/run \) -print | sed 's|^\./||'
  fi
}
files=$(sources)
[ -n "$files" ] || { echo "paths: no source file found to check"; exit 1; }
roots='net_plugin|common|tools|test|ps_offload|tuner_plugin|bench|docs|include|debian|\.ci'
bad=0 n=0
while IFS=: read -r file line ref; do
  n=$((n + 1))
  ref=${ref%.}            # a sentence's full stop
  ref=${ref%,}
  case $ref in *'*'*|*'<'*|*'%'*|*'$'*|*'{'*) continue ;; esac
  [[ $ref =~ (^|/)[A-Z][A-Z_]+(_[a-z]|/|$) ]] && continue # a placeholder: corpus/TARGET/, NAME_test.sh
  [ -e "$ref" ] && continue
  echo "$file:$line: names $ref, which does not exist"
  bad=$((bad + 1))
done < <(echo "$files" | xargs grep -noE "(^|[^A-Za-z0-9_./-])($roots)/[A-Za-z0-9_./<>*%\${}-]*[A-Za-z0-9_/>*}]" |
           sed -E "s/^([^:]+:[0-9]+:)[^A-Za-z.]?/\1/" | grep -vE ":bench/results|build/|debian/tmp|\.(o|new)$")
echo "paths: $n references checked, $bad to paths that do not exist"
[ "$bad" = 0 ]
