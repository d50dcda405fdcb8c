#!/usr/bin/env bash
# What systemd would run for a unit's ExecStart= line, for a test that runs it without systemd
# (test/pkg/in_root.sh): prints the command's words, one per line, after systemd's expansion of
# the EnvironmentFile='s variables (systemd.service(5), "Command lines"): a word that is exactly
# $NAME becomes the value split at whitespace (zero or more words), ${NAME} inside a word is
# replaced by the value as is; the environment file's lines are NAME=VALUE, # comments, blank.
# Anything beyond that subset (quotes, backslashes, % specifiers, an ExecStart prefix, several
# ExecStart or EnvironmentFile lines, an optional "-" file) is refused with exit 1, so the
# emulation never quietly differs from systemd.
#   test/pkg/execstart.sh ROOT UNIT_FILE         (UNIT_FILE and the EnvironmentFile under ROOT)
#   test/pkg/execstart.sh --env ROOT UNIT_FILE   the environment it adds instead, NAME=VALUE lines
set -euo pipefail
set -f # a '*' in a value is a word, never a glob
if [ "$1" = --env ]; then print_env=1; shift; else print_env=0; fi
root=$1 unit=$2
die() { echo "execstart.sh: $*" >&2; exit 1; }
field() { # NAME: the unit's one NAME= line's value
  local v
  v=$(sed -n "s/^$1=//p" "$root$unit")
  [ "$(printf '%s\n' "$v" | grep -c .)" -le 1 ] || die "several $1= lines in $unit"
  printf '%s' "$v"
}
exec_start=$(field ExecStart)
env_file=$(field EnvironmentFile)
[ -n "$exec_start" ] || die "no ExecStart= in $unit"
case $exec_start in [-@:+!]*) die "ExecStart prefix not emulated: $exec_start";; esac
case $exec_start in *[\"\'\\%]*) die "quotes, backslashes or specifiers not emulated: $exec_start";; esac

declare -A env=()
if [ -n "$env_file" ]; then
  case $env_file in -*) die "optional EnvironmentFile not emulated";; esac
  [ -f "$root$env_file" ] || die "EnvironmentFile $env_file missing"
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in ''|'#'*|';'*) continue;; esac
    [[ $line =~ ^([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] || die "$env_file: not NAME=VALUE: $line"
    name=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
    case $value in *[\"\'\\]*) die "$env_file: quotes or backslashes not emulated: $line";; esac
    env[$name]=$value
  done <"$root$env_file"
fi
if [ "$print_env" = 1 ]; then
  for name in "${!env[@]}"; do printf '%s=%s\n' "$name" "${env[$name]}"; done
  exit 0
fi

for word in $exec_start; do
  if [[ $word =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
    for w in ${env[${BASH_REMATCH[1]}]:-}; do printf '%s\n' "$w"; done
    continue
  fi
  while [[ $word =~ ^(.*)\$\{([A-Za-z_][A-Za-z0-9_]*)\}(.*)$ ]]; do
    word=${BASH_REMATCH[1]}${env[${BASH_REMATCH[2]}]:-}${BASH_REMATCH[3]}
  done
  case $word in *'$'*) die "a \$ systemd would not expand this way: $word";; esac
  printf '%s\n' "$word"
done
