#!/usr/bin/env bash
# A/B of two servers on the node-boot load (bench/node_boot_bench.sh's workload: a new TCP and
# TLS connection and a distinct attested document per call, 32 connecting workers of the Go
# load generator), in short rounds that alternate A,B then B,A, so that the machine's drift
# (on 2 shared vCPUs, 10 % and more over minutes) falls on both alike. Prints each side's
# median server CPU per call and the paired differences B over A, round by round: whether a
# change is faster than the noise, which node_boot_bench's comparison of two separate runs
# cannot tell apart below about 10 %.
#
#   bench/service_ab.sh [--rounds N] [--seconds S] [--parallel P] [--pin] --a CMD --b CMD
#
#   --a, --b CMD   each side's command: words (VAR=value assignments, a loader and its options,
#                  the binary, flags) to which the service's flags are appended; `go` is the
#                  grpc-go server (bench/grpcgo-server). Default: build/release's service.
#   --rounds N     rounds per side (default 8); --seconds S per round (default 6)
#   --parallel P   connecting workers (default 32: saturation)
#   --pin          each server on CPU 0 alone, the load generator on CPU 1 (the servers then
#                  run one event loop, grpc-go GOMAXPROCS=1; both read their CPU affinity)
#
# Examples (docs/BENCHMARKS.md, "Service: node boots four ways, round 3"):
#   bench/service_ab.sh --a "$PWD/../old/build/release/bin/live-patching-service"
#   bench/service_ab.sh --pin --b go
#   bench/service_ab.sh --b "GLIBC_TUNABLES=glibc.malloc.tcache_count=2000 build/release/bin/live-patching-service"
# Env: BENCH_AB_PORT_BASE (18760, uses BASE..BASE+3), BUILD_ROOT (build). Raw rounds go to
# bench/out/service-ab/rounds.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

rounds=8 seconds=6 parallel=32 pin=0
build_root=${BUILD_ROOT:-build}
a="$root/$build_root/release/bin/live-patching-service" b=$a
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --pin) pin=1; shift ;;
    --a) a=$2; shift 2 ;;
    --b) b=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in rounds seconds parallel; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--$v wants a whole number of at least 1" >&2; exit 2; }
done

out=$root/bench/out/service-ab
work=$out/work
rm -rf "$out" && mkdir -p "$work/etc/components" "$work/pki"
source bench/lib/stack.sh
die() { echo "service_ab: $*" >&2; exit 1; }
base=${BENCH_AB_PORT_BASE:-18760}
stack_ports_free "$base" $((base + 3)) BENCH_AB_PORT_BASE
stack_raise_fds $((parallel + 1000))
stack_bench_tools "$build_root"
fqdn='ab-aks-dns-12345678.hcp.eastus.azmk8s.io'
config='{"hotfixes":{"202604.01":"202604.01.3"}}'
server_cpus=0-$(($(nproc) - 1)) client_cpus=$server_cpus
if ((pin)); then
  (($(nproc) >= 2)) || die "--pin needs 2 CPUs"
  server_cpus=0 client_cpus=1
fi

log "PKI, and a pool of distinct attested documents (both sides read the same documents)"
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" ab-cluster-ca "$fqdn" "$fqdn"
printf '%s' "$config" >"$work/etc/components/aksNodeController.json"
stack_imds_pki "$work/pki" ec
pool=$work/tokens.txt
stack_mint_pool "$mint" "$work/pki" $(((rounds * seconds + 2) * 2800)) "$pool"

declare -A port_of=([A]=$base [B]=$((base + 1))) pid_of=() cursor=([A]=0 [B]=0)
# start SIDE CMD: the server, on its CPUs, on port_of[SIDE]; sets pid_of[SIDE].
start() {
  local side=$1 cmd=$2 port=${port_of[$1]} flags
  flags=(--listen "127.0.0.1:$port" --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key"
    --components-dir "$work/etc/components" --attestation-roots "$work/pki/roots.pem")
  if [[ $cmd == go ]]; then
    cmd=$goserver
  else
    flags+=(--max-connections-per-peer $((parallel + 100)) --metrics-listen "127.0.0.1:$((port + 2))")
  fi
  local words
  read -ra words <<<"$cmd"
  taskset -c "$server_cpus" env "${words[@]}" "${flags[@]}" >"$work/$side.log" 2>&1 &
  pids+=($!)
  pid_of[$side]=$!
  stack_wait_port "$port" "$work"
}
start A "$a"
start B "$b"

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
rounds_tsv=$out/rounds.tsv
printf 'round\tside\tok\tms_cpu_per_call\n' >"$rounds_tsv"
# run SIDE ROUND SECONDS: one round; appends to rounds.tsv unless ROUND is "warm".
run() {
  local side=$1 r=$2 dur=$3 c0 c1 line ok bad used
  c0=$(cpu_ticks "${pid_of[$side]}")
  line=$(taskset -c "$client_cpus" "$benchclient" boot --addr "127.0.0.1:${port_of[$side]}" \
    --server-name "$fqdn" --tokens-file "$pool" --skip "${cursor[$side]}" --parallel "$parallel" \
    --seconds "$dur" --expect "$config" 2>"$work/client-$side.err" | grep '^result ') ||
    die "side $side round $r: the load generator failed ($(head -3 "$work/client-$side.err"))"
  stack_wait_closed "${port_of[$side]}"  # the other side then starts from nothing held
  c1=$(cpu_ticks "${pid_of[$side]}")
  ok=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$line")
  bad=$(sed -n 's/.* failed=\([0-9]*\).*/\1/p' <<<"$line")
  used=$(sed -n 's/.* tokens_used=\([0-9]*\).*/\1/p' <<<"$line")
  ((bad == 0 && ok > 0)) || die "side $side round $r: $bad failed calls, $ok OK: $line"
  cursor[$side]=$((cursor[$side] + used))
  [[ $r == warm ]] && return 0
  awk -v r="$r" -v s="$side" -v ok="$ok" -v c="$((c1 - c0))" -v t="$tck" \
    'BEGIN { printf "%s\t%s\t%d\t%.4f\n", r, s, ok, 1000 * c / t / ok }' >>"$rounds_tsv"
}

log "rounds: $rounds x $seconds s per side, $parallel workers, alternating$( ((pin)) && echo ', pinned')"
run A warm 2
run B warm 2
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then run A "$r" "$seconds"; run B "$r" "$seconds"; else run B "$r" "$seconds"; run A "$r" "$seconds"; fi
done

echo "# A/B on the node-boot load: $rounds rounds x $seconds s, $parallel workers$( ((pin)) && echo ', server on CPU 0, load generator on CPU 1')"
echo "A: $a"
echo "B: $b"
awk -F'\t' 'NR > 1 { v[$2, $1] = $4; n = ($1 > n ? $1 : n) }
  function median(x, k,   i, j, t) {
    for (i = 2; i <= k; i++) for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
    return k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
  }
  END {
    for (r = 1; r <= n; r++) { a[r] = v["A", r]; b[r] = v["B", r]; d[r] = 100 * (b[r] - a[r]) / a[r]; sa = sa " " a[r]; sb = sb " " b[r] }
    for (r = 1; r <= n; r++) { s += d[r] } mean = s / n
    for (r = 1; r <= n; r++) { q += (d[r] - mean) ^ 2 } sd = n > 1 ? sqrt(q / (n - 1)) : 0
    printf "A ms CPU per call:%s\nB ms CPU per call:%s\n", sa, sb
    ma = median(a, n); mb = median(b, n)
    printf "median ms CPU per call: A %.3f, B %.3f; calls per CPU-second, A over B: %.2f\n", ma, mb, mb / ma
    printf "paired difference B-A per round: mean %+.1f %%, standard error %.1f %% (n=%d)\n", mean, sd / sqrt(n), n
  }' "$rounds_tsv" | tee "$out/summary.txt"
