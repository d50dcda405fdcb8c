#!/usr/bin/env bash
# Checks that the net plugin's modules do not include each other in a circle.  A module is a
# source file and its header (net_plugin/comm/comm.c and comm.h are the module comm/comm); module
# A depends on B when a file of A includes B's header.  Prints the modules of every cycle found
# (tsort's report) and exits 1; exits 0 when the graph is acyclic.
#   tools/check/layers.sh [DIR]   (default net_plugin)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-net_plugin}
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
while IFS= read -r f; do
  from=${f#"$dir"/}; from=${from%.*}
  echo "$from $from" >>"$edges" # every module appears, even one without edges
  { grep -oE '^#include "[a-z_/]+\.h"' "$f" || true; } | sed -E 's/#include "(.*)\.h"/\1/' | while read -r h; do
    [ -e "$dir/$h.h" ] || continue # common/, ps_offload/, tuner_plugin/ headers: below the plugin
    [ "$h" = "$from" ] || echo "$from $h" >>"$edges"
  done
done < <(find "$dir" -name '*.[ch]' | sort)
if out=$(tsort "$edges" 2>&1 >/dev/null) && [ -z "$out" ]; then
  echo "layers: $(sort -u "$edges" | wc -l) include edges between $(cut -d' ' -f1 "$edges" | sort -u | wc -l) modules, no cycle"
  exit 0
fi
echo "layers: modules that include each other in a circle:"
echo "$out" | sed 's/^tsort: /  /'
exit 1
