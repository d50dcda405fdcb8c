#!/usr/bin/env bash
# Prints the manual page of one of braid's programs, made from its own --help text (and, for
# braid-tune, each command's), verbatim, so the page never says something the program does not:
#   tools/pkg/manpage.sh build/braid-perf > build/man/braid-perf.1
# The NAME line (what whatis and apropos show) is the summary below; the date is
# SOURCE_DATE_EPOCH's (dpkg-buildpackage sets it from debian/changelog) or today's.
set -euo pipefail
prog=$1
name=$(basename "$prog")
here=$(cd "$(dirname "$0")/../.." && pwd)
case $name in
  braid-perf) summary="drive an NCCL net plugin as NCCL's proxy does, checking every result"; doc=tools.md ;;
  braid-stat) summary="show the rails of braid's metrics files"; doc=tools.md ;;
  braid-tune) summary="explain the braid NCCL tuner's choices, merge health files, pin its inputs"; doc=tuner.md ;;
  braid-sim) summary="simulate allreduce on a large rail-optimized GPU cluster with braid's scheduler"; doc=sim.md ;;
  braid-trace-shape) summary="print or compare the shape of braid-trace call traces"; doc=tools.md ;;
  braid-ps) summary="summation server for braid's NCCL CollNet"; doc=braid-ps.md ;;
  *) echo "manpage.sh: no summary for $name" >&2; exit 2 ;;
esac
version=$(sed -n 's/^#define BRAID_VERSION "\(.*\)"/\1/p' "$here/common/version.h")
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%d)

# roff, verbatim: backslashes and minus signs escaped, a leading dot or quote made literal.
verbatim() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
help_of() { # ARGS...: the program's --help, which must succeed and print something
  local out
  out=$("$prog" "$@" --help) || { echo "manpage.sh: $name $* --help failed" >&2; exit 1; }
  [ -n "$out" ] || { echo "manpage.sh: $name $* --help printed nothing" >&2; exit 1; }
  printf '%s\n' "$out"
}

upper=$(tr '[:lower:]' '[:upper:]' <<<"$name")
cat <<ROFF
.TH $upper 1 "$date" "braid $version" "braid"
.SH NAME
$(sed 's/-/\\-/g' <<<"$name") \\- $summary
.SH DESCRIPTION
The text of \\fB$(sed 's/-/\\-/g' <<<"$name") \\-\\-help\\fR:
.PP
.nf
$(help_of | verbatim)
.fi
ROFF
if [ "$name" = braid-tune ]; then
  for cmd in explain health pin; do
    printf '.SH "%s"\n.nf\n%s\n.fi\n' "BRAID\\-TUNE ${cmd^^}" "$(help_of "$cmd" | verbatim)"
  done
fi
cat <<ROFF
.SH SEE ALSO
$doc and the rest of braid's documentation: /usr/share/doc/braid\\-nccl\\-plugins/ from the
Debian packages, share/doc/braid/ under the prefix of \\fBmake install\\fR, docs/ in the source.
ROFF
