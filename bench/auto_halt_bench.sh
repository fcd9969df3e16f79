#!/usr/bin/env bash
# The cost of the automatic halt (docs/ROLLOUTS.md, "Automatic halt"), two figures:
#  1. a node's report against its GetComponentConfig: the service's CPU per call of each, in
#     alternating rounds of the node-boot load on ONE server (every call a new TCP connection,
#     a full TLS handshake and a distinct attested document: bench/node_boot_bench.sh's load,
#     `benchclient boot`, with `--report` for ReportHotfixOutcome);
#  2. one evaluation with 64 auto-halting rollouts that all have evidence, against 1: its
#     wall time (lp_auto_halt_evaluation_seconds_total), the CPU of the service's evaluation
#     thread (lp-auto-halt in /proc/PID/task), and Prometheus' CPU beyond its scraping (the
#     same window with the 64 rollouts but no auto_halt is the baseline).
#
#   bench/auto_halt_bench.sh [--rounds N] [--seconds S] [--parallel P] [--window S]
#     --rounds N    rounds per kind of call (default 6); order A,B then B,A, ...
#     --seconds S   seconds of load per round (default 10)
#     --parallel P  connecting workers (default 32)
#     --window S    seconds each evaluation phase is watched (default 30), --auto-halt-interval 1s
#   Ports (env): BENCH_AUTO_HALT_PORT_BASE=18780 (BASE..BASE+2)
#   BENCH_JOBS=1, BUILD_ROOT=build, BENCH_NO_BUILD=1, BENCH_CXX_BIN=/path: as rollout_bench.sh.
# Raw output: bench/out/auto-halt/ (ignored by git), summary in bench/out/auto-halt/summary.md.
# Exit status 1 when any call failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

rounds=6 seconds=10 parallel=32 window=30
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in rounds seconds parallel window; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--$v wants a whole number from 1" >&2; exit 2; }
done
# Each round of either kind uses up to about 3,500 documents a second on this machine (warm-ups
# and the three evaluation phases' 2 s fills included).
tokens=$(((2 * (rounds + 1) * seconds + 3 * 2 + 2) * 3500))

base=${BENCH_AUTO_HALT_PORT_BASE:-18780}
build_root=${BUILD_ROOT:-build}
fqdn='bench-aks-dns-12345678.hcp.eastus.azmk8s.io'
# The service's certificate is for the apiserver FQDN: nodes verify it for the host they dial
# (AgentBaker #9351; they pinned aks-security-patch.data.mcr.microsoft.com before).
lps_name=$fqdn
port=$base metrics=$((base + 1)) prom_port=$((base + 2))
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY grpc_proxy

out=$root/bench/out/auto-halt
work=$out/work
rm -rf "$out" && mkdir -p "$work/etc" "$work/components" "$work/prometheus"

source bench/lib/stack.sh
die() { echo "auto_halt_bench: $*" >&2; exit 1; }
stack_ports_free "$base" $((base + 2)) BENCH_AUTO_HALT_PORT_BASE
stack_raise_fds $((parallel * 4 + 1000))
command -v prometheus >/dev/null || die "no prometheus (scripts/install-deps.sh installs it)"

stack_service_binary "$build_root" "$out"
stack_bench_tools "$build_root"

log "PKI and $tokens attested documents (not timed)"
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" bench-cluster-ca "$lps_name" "$fqdn"
stack_imds_pki "$work/pki" ec
pool=$work/tokens.txt
stack_mint_pool "$mint" "$work/pki" "$tokens" "$pool"

# N rollouts for everyone at 100 % since an hour ago, all shipping 202604.01.4, so that a
# report of 202604.01.4 is attributed to every one; with auto_halt that never halts (100 %).
component_file() {  # N with|without
  local n=$1 with=$2 k since
  since=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
  {
    printf '{"hotfixes":{"202604.01":"202604.01.3"},"rollouts":['
    for ((k = 0; k < n; k++)); do
      ((k == 0)) || printf ','
      printf '\n {"name":"ring%02d","hotfixes":{"202604.01":"202604.01.4"},' "$k"
      printf '"steps":[{"at":"%s","percent":100}]' "$since"
      [[ $with == with ]] && printf ',"auto_halt":{"max_failure_percent":100,"min_reports":1}'
      printf '}'
    done
    printf '\n]}\n'
  } >"$work/components/.next" && mv "$work/components/.next" "$work/components/aksNodeController.json"
}
component_file 1 with

log "Prometheus (scraping every second) and the service (--auto-halt-interval 1s)"
printf 'global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: live-patching\n    static_configs: [{targets: ["127.0.0.1:%s"]}]\n' \
  "$metrics" >"$work/prometheus/prometheus.yml"
prometheus --config.file="$work/prometheus/prometheus.yml" --storage.tsdb.path="$work/prometheus/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
prom_pid=$!
pids+=($!)
"$bin" --listen "127.0.0.1:$port" --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
  --components-dir "$work/components" --attestation-roots "$work/pki/roots.pem" \
  --metrics-listen "127.0.0.1:$metrics" --prometheus-url "http://127.0.0.1:$prom_port" \
  --prometheus-selector 'job="live-patching"' \
  --auto-halt-interval 1s >"$work/service.log" 2>&1 &
pid=$!
pids+=($!)
for p in "$port" "$metrics" "$prom_port"; do stack_wait_port "$p" "$work"; done

cpu_ticks() { awk '{ print $14 + $15 }' "$1"; }
tck=$(getconf CLK_TCK)
cursor=0 failures=0
samples=$out/samples.tsv
printf 'round\tkind\tok\tfailed\tcalls_per_s\tserver_cpu_s\tms_cpu_per_call\n' >"$samples"
# run_round KIND ROUND [record]: A = GetComponentConfig, B = ReportHotfixOutcome.
run_round() {
  local kind=$1 r=$2 record=${3:-} f=$out/boot-$1-$2.txt c0 c1 rc=0 line
  local -a extra=()
  [[ $kind == B ]] && extra=(--report 202604.01.4)
  sleep 1
  c0=$(cpu_ticks "/proc/$pid/stat")
  "$benchclient" boot --addr "127.0.0.1:$port" --tokens-file "$pool" --skip "$cursor" \
    --parallel "$parallel" --seconds "$seconds" --server-name "$fqdn" "${extra[@]}" \
    >"$f" 2>"$f.err" || rc=$?
  sleep 0.5
  c1=$(cpu_ticks "/proc/$pid/stat")
  line=$(grep '^result ' "$f") || { cat "$f" "$f.err" >&2; die "$kind round $r: benchclient failed (rc $rc)"; }
  get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
  cursor=$((cursor + $(get tokens_used)))
  (($(get failed) == 0)) || { failures=$((failures + $(get failed))); head -5 "$f.err" >&2; }
  (($(get exhausted) == 0)) || die "the document pool ran out"
  [[ -n $record ]] || return 0
  awk -v r="$r" -v k="$kind" -v ok="$(get ok)" -v bad="$(get failed)" -v cps="$(get calls_per_s)" \
    -v c0="$c0" -v c1="$c1" -v t="$tck" 'BEGIN { cpu = (c1 - c0) / t
      printf "%s\t%s\t%d\t%d\t%.1f\t%.2f\t%.4f\n", r, k, ok, bad, cps, cpu, 1000 * cpu / ok }' >>"$samples"
  tail -1 "$samples" | awk -F'\t' '{ printf "%s round %s: %d OK, %s calls/s, %.4f ms CPU per call\n", $2, $1, $3, $5, $7 }' >&2
}

log "1. reports against GetComponentConfig: warm-up, then $rounds rounds x $seconds s of each"
run_round A warmup
run_round B warmup
for ((r = 1; r <= rounds; r++)); do
  order=(A B)
  ((r % 2 == 0)) && order=(B A)
  for kind in "${order[@]}"; do run_round "$kind" "$r" record; done
done
reports=$(grep -c '"msg":"ReportHotfixOutcome".*"code":"OK"' "$work/service.log" || true)
dups=$(grep -c '"msg":"ReportHotfixOutcome".*"duplicate":true' "$work/service.log" || true)
((dups == 0)) || die "$dups reports were repeats: every document is a distinct node"
source bench/lib/tsv.sh  # col, median
med_a=$(col A 7 | median) med_b=$(col B 7 | median)
cps_a=$(col A 5 | median) cps_b=$(col B 5 | median)
ratio=$(awk -v a="$med_a" -v b="$med_b" 'BEGIN { printf "%.3f", b / a }')

# ---- 2. the evaluation ------------------------------------------------------------------
thread_dir() {  # the lp-auto-halt thread's /proc folder
  local t
  for t in /proc/"$pid"/task/*; do
    [[ $(cat "$t/comm" 2>/dev/null) == lp-auto-halt ]] && { echo "$t"; return; }
  done
  die "no lp-auto-halt thread in /proc/$pid/task"
}
thread_ns() { awk '{ print $1 }' "$1/schedstat"; }  # on-CPU time in ns: finer than ticks
metric() { curl -sf "http://127.0.0.1:$metrics/metrics" | awk -v m="$1" '$1 == m { print $2; exit }'; }
evals() { curl -sf "http://127.0.0.1:$metrics/metrics" |
  awk '/^lp_auto_halt_evaluations_total\{/ { s += $2 } END { print s + 0 }'; }
# phase LABEL N with|without: N rollouts (with or without auto_halt), a round of reports so
# every auto-halting rollout has evidence, then `window` seconds watched.
declare -A phase_evals phase_wall phase_thread phase_prom
phase() {
  local label=$1 n=$2 with=$3 e0 e1 s0 s1 t0 t1 p0 p1 ts
  component_file "$n" "$with"
  sleep 2  # reloaded (200 ms debounce) and judged once
  local saved=$seconds
  seconds=2
  run_round B "fill-$label"
  seconds=$saved
  sleep 3  # scraped, and the first (whole-window) read of the new rollouts done
  ts=$(thread_dir)
  e0=$(evals) s0=$(metric lp_auto_halt_evaluation_seconds_total) t0=$(thread_ns "$ts")
  p0=$(cpu_ticks "/proc/$prom_pid/stat")
  sleep "$window"
  e1=$(evals) s1=$(metric lp_auto_halt_evaluation_seconds_total) t1=$(thread_ns "$ts")
  p1=$(cpu_ticks "/proc/$prom_pid/stat")
  phase_evals[$label]=$(awk -v a="$e0" -v b="$e1" 'BEGIN { print b - a }')
  phase_wall[$label]=$(awk -v a="$s0" -v b="$s1" -v n="${phase_evals[$label]}" 'BEGIN { printf "%.2f", (n > 0) ? 1000 * (b - a) / n : 0 }')
  phase_thread[$label]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
  phase_prom[$label]=$(awk -v a="$p0" -v b="$p1" -v t="$tck" 'BEGIN { printf "%.3f", (b - a) / t }')
  echo "$label: $n rollouts ($with auto_halt): ${phase_evals[$label]} evaluations in ${window} s," \
       "${phase_wall[$label]} ms wall each; thread CPU ${phase_thread[$label]} s, Prometheus CPU ${phase_prom[$label]} s" >&2
}
log "2. evaluations over ${window} s: 64 rollouts without auto_halt, with it on 1, on all 64"
phase none 64 without
phase one 1 with
phase all 64 with
curl -sf "http://127.0.0.1:$metrics/rollouts" >"$work/rollouts.json"
with_reports=$(grep -c '"signal": "ok"' "$work/rollouts.json" || true)
((with_reports == 64)) || die "GET /rollouts shows $with_reports rollouts with evidence read, not 64"
per_eval() {  # LABEL: ms of thread CPU and of Prometheus CPU (over the baseline) per evaluation
  awk -v n="${phase_evals[$1]}" -v t="${phase_thread[$1]}" -v p="${phase_prom[$1]}" \
    -v p0="${phase_prom[none]}" 'BEGIN { printf "%.2f %.2f\n", (n > 0) ? 1000 * t / n : 0, (n > 0) ? 1000 * (p - p0) / n : 0 }'
}
read -r thread_one prom_one < <(per_eval one)
read -r thread_all prom_all < <(per_eval all)
series=$(curl -sfG --data-urlencode 'query=count(lp_rollout_outcomes_total)' \
  "http://127.0.0.1:$prom_port/api/v1/query" | sed -n 's/.*"value":\[[^,]*,"\([0-9]*\)"\].*/\1/p')

summary=$out/summary.md
{
  echo "# auto_halt_bench $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  echo "1. The service's CPU per call, medians of $rounds rounds x $seconds s, $parallel workers, every call a new connection and node:"
  echo
  echo "| call | ms CPU per call | calls/s |"
  echo "|---|---|---|"
  echo "| GetComponentConfig (A) | $med_a | $cps_a |"
  echo "| ReportHotfixOutcome (B) | $med_b | $cps_b |"
  echo "| B / A | $ratio | |"
  echo
  echo "$reports reports counted, none a repeat."
  echo
  echo "2. One evaluation (--auto-halt-interval 1s, Prometheus scraping every 1 s, ${window} s watched; $series outcome series in Prometheus):"
  echo
  echo "| rollouts with auto_halt | evaluations | wall ms each | service thread CPU ms each | Prometheus CPU ms each (over no auto_halt) |"
  echo "|---|---|---|---|---|"
  echo "| 0 of 64 | ${phase_evals[none]} | - | - | (baseline ${phase_prom[none]} s) |"
  echo "| 1 | ${phase_evals[one]} | ${phase_wall[one]} | $thread_one | $prom_one |"
  echo "| 64 | ${phase_evals[all]} | ${phase_wall[all]} | $thread_all | $prom_all |"
} >"$summary"
cat "$summary"
((failures == 0)) || die "$failures calls failed"
