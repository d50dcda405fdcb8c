#!/usr/bin/env bash
# lintian on the packages of `make deb` (suite deb-lintian): no tag at any level, pedantic
# included, but those debian/*.lintian-overrides explain (an override that no longer matches is
# itself a tag, unused-override).  Prints lintian's report, overrides and their reasons included.
#   test/pkg/lintian_test.sh [DEB_DIR]        (default build/deb; make deb first)
set -uo pipefail
cd "$(dirname "$0")/../.."
debs=${1:-build/deb}
changes=$(ls "$debs"/*.changes 2>/dev/null | head -n 1)
[ -n "$changes" ] || { echo "deb-lintian: no $debs/*.changes: run make deb first"; exit 1; }
echo "lintian $(lintian --version | awk '{ print $2 }') on $changes"
out=$(lintian --display-info --pedantic --show-overrides "$changes" 2>&1) || rc=$? # exit 2 counts overrides
grep -v '^running with root privileges is not recommended' <<<"$out"
# Tags: "E:", "W:", "I:", "P:" (pedantic), "X:" (experimental) lines; "O:" is an override, "N:" its reason.
if [ "${rc:-0}" -gt 2 ]; then echo "deb-lintian: lintian failed (exit $rc)"; exit 1; fi
if grep -qE '^[EWIPX]: ' <<<"$out"; then echo "deb-lintian: lintian reported the tags above"; exit 1; fi
echo "deb-lintian: no tag left ($(grep -c '^O: ' <<<"$out") overridden, with their reasons above)"
