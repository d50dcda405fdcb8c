# Sourced by the bench scripts: repeated measurements by name, their medians and ratios.
#   add NAME VALUE   record one measurement;  m NAME   the median of NAME's values;  mn NAME   the least;
#   ratio A B        A / B with two decimals (0 when B is 0);  ${vals[NAME]} the raw values.
declare -A vals
add() { vals[$1]+="$2 "; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
m() { echo "${vals[$1]:-}" | median; }
mn() { echo "${vals[$1]:-}" | tr ' ' '\n' | grep -v '^$' | sort -g | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
