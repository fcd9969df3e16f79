# shellcheck shell=bash
# The rounds' statistics the benches summarise (sourced by node_boot_bench.sh, service_bench.sh,
# rollout_bench.sh and auto_halt_bench.sh), over the TSV of samples each writes to $samples:
# one row per round and server, the server's label in column 2.

# col SERVER K: column K of the rows of $samples whose column 2 is SERVER (a header row, whose
# column 2 is a name no server has, is never one of them).
col() { awk -F'\t' -v s="$1" -v k="$2" '$2 == s { print $k }' "$samples"; }

# median: of the numbers on stdin, one a line; the mean of the middle two for an even count.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
