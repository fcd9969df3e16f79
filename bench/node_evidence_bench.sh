#!/usr/bin/env bash
# The cost of counting nodes (docs/ROLLOUTS.md, "Counting nodes") as rollouts, nodes and
# replicas grow: R replicas of the Release service (3 by default) behind no proxy, a Debian
# Prometheus scraping all of them, 64 rollouts for everyone that all have auto_halt, and nodes
# reporting in rising waves (1,000, 10,000, 100,000 by default), each report a new TCP
# connection, a full TLS handshake and a distinct attested document (`benchclient boot
# --report`), spread evenly over the replicas. Each report counts toward all 64 rollouts.
#
# Per wave: the service's CPU per report against its CPU per GetComponentConfig (the
# reference, a round of checks measured in the same run), once every replica counts the wave;
# then, once the wave has left the read window (a minute and three intervals), over a window,
# one quiet evaluation's wall time and its thread's CPU (the mean over the replicas),
# Prometheus' CPU per second, the lp_rollout_node_sketch series Prometheus holds per
# rollout (every replica's), the bytes of one replica's /metrics, and the processes' RSS.
#
#   bench/node_evidence_bench.sh [--waves "1000 10000 100000"] [--replicas 3] [--window 30]
#     --waves     cumulative node counts, ascending (default "1000 10000 100000")
#     --replicas  service replicas (default 3)
#     --window    seconds each wave's evaluations are watched (default 30)
#     --interval  --auto-halt-interval and Prometheus' scrape interval, seconds (default 5)
#   Ports (env): BENCH_NODE_EVIDENCE_PORT_BASE=18820 (BASE..BASE+2*replicas)
#   BENCH_JOBS=1, BUILD_ROOT=build, BENCH_NO_BUILD=1, BENCH_CXX_BIN=/path: as rollout_bench.sh.
# Raw output: bench/out/node-evidence/ (ignored by git), summary in bench/out/node-evidence/summary.md.
# Exit status 1 when a call failed or a wave's count is off by more than 5 %.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

waves="1000 10000 100000" replicas=3 window=30 interval=5
while (($#)); do
  case $1 in
    --waves) waves=$2; shift 2 ;;
    --replicas) replicas=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in replicas window interval; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--$v wants a whole number from 1" >&2; exit 2; }
done
last=0
for w in $waves; do
  [[ $w =~ ^[1-9][0-9]*$ ]] && ((w > last)) || { echo "--waves wants ascending whole numbers" >&2; exit 2; }
  last=$w
done
checks=$((last / 10 > 3000 ? 3000 : (last / 10 < 300 ? 300 : last / 10)))
tokens=$((last + checks))

base=${BENCH_NODE_EVIDENCE_PORT_BASE:-18820}
build_root=${BUILD_ROOT:-build}
fqdn='bench-aks-dns-12345678.hcp.eastus.azmk8s.io'
prom_port=$((base + 2 * replicas))
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY grpc_proxy

out=$root/bench/out/node-evidence
work=$out/work
rm -rf "$out" && mkdir -p "$work/etc" "$work/components" "$work/prometheus"

source bench/lib/stack.sh
die() { echo "node_evidence_bench: $*" >&2; exit 1; }
stack_ports_free "$base" "$prom_port" BENCH_NODE_EVIDENCE_PORT_BASE
stack_raise_fds 4096
command -v prometheus >/dev/null || die "no prometheus (scripts/install-deps.sh installs it)"

stack_service_binary "$build_root" "$out"
stack_bench_tools "$build_root"

log "PKI and $tokens attested documents (not timed)"
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" bench-cluster-ca "$fqdn" "$fqdn"
stack_imds_pki "$work/pki" ec
pool=$work/tokens.txt
stack_mint_pool "$mint" "$work/pki" "$tokens" "$pool"

# 64 rollouts for everyone at 100 % since a minute ago, all shipping 202604.01.4, each with an
# auto_halt that never halts (100 %): every report counts toward all 64.
since=$(date -u -d '-1 minute' +%Y-%m-%dT%H:%M:%SZ)
{
  printf '{"hotfixes":{"202604.01":"202604.01.3"},"rollouts":['
  for ((k = 0; k < 64; k++)); do
    ((k == 0)) || printf ','
    printf '\n {"name":"ring%02d","hotfixes":{"202604.01":"202604.01.4"},' "$k"
    printf '"steps":[{"at":"%s","percent":100}],' "$since"
    printf '"auto_halt":{"max_failure_percent":100,"min_reports":1,"since":"%s"}}' "$since"
  done
  printf '\n]}\n'
} >"$work/components/aksNodeController.json"

log "Prometheus (scraping every ${interval} s) and $replicas replicas (--auto-halt-interval ${interval}s)"
targets=''
for ((i = 0; i < replicas; i++)); do targets+="${targets:+, }\"127.0.0.1:$((base + 2 * i + 1))\""; done
printf 'global: {scrape_interval: %ss}\nscrape_configs:\n  - job_name: live-patching\n    static_configs: [{targets: [%s]}]\n' \
  "$interval" "$targets" >"$work/prometheus/prometheus.yml"
prometheus --config.file="$work/prometheus/prometheus.yml" --storage.tsdb.path="$work/prometheus/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
prom_pid=$!
pids+=($!)
declare -a rpid
for ((i = 0; i < replicas; i++)); do
  "$bin" --listen "127.0.0.1:$((base + 2 * i))" --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
    --components-dir "$work/components" --attestation-roots "$work/pki/roots.pem" \
    --metrics-listen "127.0.0.1:$((base + 2 * i + 1))" --prometheus-url "http://127.0.0.1:$prom_port" \
    --prometheus-selector 'job="live-patching"' --auto-halt-interval "${interval}s" \
    >"$work/service-$i.log" 2>&1 &
  rpid[i]=$!
  pids+=($!)
done
stack_wait_port "$prom_port" "$work"
for ((i = 0; i < replicas; i++)); do
  stack_wait_port $((base + 2 * i)) "$work"
  stack_wait_port $((base + 2 * i + 1)) "$work"
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_mb() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
tck=$(getconf CLK_TCK)
services_ticks() { local i s=0; for ((i = 0; i < replicas; i++)); do s=$((s + $(cpu_ticks "${rpid[i]}"))); done; echo "$s"; }
metrics_of() { curl -sf "http://127.0.0.1:$((base + 2 * $1 + 1))/metrics"; }
sum_metric() {  # REPLICA NAME-PREFIX: the sum of a family's samples
  metrics_of "$1" | awk -v m="$2" 'index($1, m) == 1 && (substr($1, length(m) + 1, 1) ~ /^[{ ]?$/) { s += $2 } END { print s + 0 }'
}
thread_ns() {  # REPLICA: the lp-auto-halt thread's on-CPU ns
  local t
  for t in /proc/"${rpid[$1]}"/task/*; do
    [[ $(cat "$t/comm" 2>/dev/null) == lp-auto-halt ]] && { awk '{ print $1 }' "$t/schedstat"; return; }
  done
  die "no lp-auto-halt thread in replica $1"
}
reports_seen() {  # REPLICA: ring00's reporting nodes as the replica judges them
  curl -sf "http://127.0.0.1:$((base + 2 * $1 + 1))/rollouts" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); r=[x for x in d["components"]["aksNodeController"] if x["name"]=="ring00"][0]; print(r["auto_halt"]["reports"] if r.get("auto_halt") else -1)'
}
prom_query() {
  curl -sfG --data-urlencode "query=$1" "http://127.0.0.1:$prom_port/api/v1/query" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)'
}

# send N FROM KIND: N documents of the pool from line FROM, split over the replicas, every one
# sent (the tokens run out, then each client ends); sets sent_ok, sent_failed, sent_seconds.
send() {
  local n=$1 from=$2 kind=$3 i share start end f rc=0
  local -a extra=() cpids=()
  [[ $kind == report ]] && extra=(--report 202604.01.4)
  start=$(date +%s.%N)
  for ((i = 0; i < replicas; i++)); do
    share=$((n / replicas + (i < n % replicas ? 1 : 0)))
    ((share > 0)) || continue
    f=$work/$kind-$from-$i
    sed -n "$((from + 1)),$((from + n))p" "$pool" | sed -n "$((i + 1))~${replicas}p" >"$f.tokens"
    "$benchclient" boot --addr "127.0.0.1:$((base + 2 * i))" --tokens-file "$f.tokens" \
      --parallel 8 --seconds 3600 --server-name "$fqdn" "${extra[@]}" >"$f.txt" 2>"$f.err" &
    cpids+=($!)
  done
  for i in "${cpids[@]}"; do wait "$i" || rc=1; done
  end=$(date +%s.%N)
  ((rc == 0)) || die "a client failed: $(cat "$work/$kind-$from-"*.err)"
  sent_ok=$(cat "$work/$kind-$from-"*.txt | sed -n 's/^result ok=\([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
  sent_failed=$(cat "$work/$kind-$from-"*.txt | sed -n 's/^result .* failed=\([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
  ((sent_ok == n)) || die "$sent_ok of $n $kind calls answered OK (see $work/$kind-$from-*)"
  sent_seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  ((sent_failed == 0)) || die "$sent_failed $kind calls failed (see $work/$kind-$from-*)"
}

log "the reference: $checks GetComponentConfig calls (a new node each)"
# Once every replica has judged the rollouts (their first, full read is behind them), so that
# its cost is in neither the reference nor a wave.
for ((i = 0; i < replicas; i++)); do
  for _ in $(seq 600); do
    (($(sum_metric "$i" lp_auto_halt_evaluations_total | cut -d. -f1) > 0)) && break
    sleep 0.1
  done
done
c0=$(services_ticks)
send "$checks" 0 check
c1=$(services_ticks)
check_ms=$(awk -v c=$((c1 - c0)) -v t="$tck" -v n="$sent_ok" 'BEGIN { printf "%.4f", 1000 * c / t / n }')
check_rate=$(awk -v n="$sent_ok" -v s="$sent_seconds" 'BEGIN { printf "%.0f", n / s }')
echo "check: $sent_ok calls, $check_ms ms CPU each (all replicas), $check_rate calls/s" >&2

rows=$out/rows.tsv
printf 'nodes\treport_ms\tratio\treports_per_s\teval_wall_ms\teval_thread_ms\tprom_cpu_pct\tseries_per_rollout\tmetrics_kb\tservice_rss_mb\tprom_rss_mb\tcounted\n' >"$rows"
sent_total=0 next_token=$checks
for wave in $waves; do
  n=$((wave - sent_total))
  log "wave to $wave nodes: $n reports (each counted toward 64 rollouts)"
  c0=$(services_ticks)
  send "$n" "$next_token" report
  c1=$(services_ticks)
  next_token=$((next_token + n)) sent_total=$wave
  report_ms=$(awk -v c=$((c1 - c0)) -v t="$tck" -v n="$sent_ok" 'BEGIN { printf "%.4f", 1000 * c / t / n }')
  rate=$(awk -v n="$sent_ok" -v s="$sent_seconds" 'BEGIN { printf "%.0f", n / s }')
  # Every replica counts the wave: its own reports at once, the others' through Prometheus.
  counted=()
  for _ in $(seq 600); do
    counted=()
    ok=1
    for ((i = 0; i < replicas; i++)); do
      c=$(reports_seen "$i")
      counted+=("$c")
      awk -v c="$c" -v w="$wave" 'BEGIN { exit !(c >= 0.95 * w && c <= 1.05 * w) }' || ok=0
    done
    ((ok)) && break
    sleep 1
  done
  ((ok)) || die "after wave $wave the replicas count ${counted[*]}"
  # Quiet: once no sketch changed within the short reads' window (the interval since the last
  # read, plus a minute and an interval for late scrapes), a read returns only what changed.
  quiet=$((60 + 3 * interval))
  log "every replica counts ${counted[*]}; ${quiet} s for the wave to leave the read window, then ${window} s of evaluations"
  sleep "$quiet"
  declare -a e0 s0 t0
  for ((i = 0; i < replicas; i++)); do
    e0[i]=$(sum_metric "$i" lp_auto_halt_evaluations_total)
    s0[i]=$(sum_metric "$i" lp_auto_halt_evaluation_seconds_total)
    t0[i]=$(thread_ns "$i")
  done
  p0=$(cpu_ticks "$prom_pid")
  sleep "$window"
  p1=$(cpu_ticks "$prom_pid")
  evals=0 wall=0 thread=0
  for ((i = 0; i < replicas; i++)); do
    evals=$(awk -v a="$evals" -v b="$(sum_metric "$i" lp_auto_halt_evaluations_total)" -v c="${e0[i]}" 'BEGIN { print a + b - c }')
    wall=$(awk -v a="$wall" -v b="$(sum_metric "$i" lp_auto_halt_evaluation_seconds_total)" -v c="${s0[i]}" 'BEGIN { print a + b - c }')
    thread=$(awk -v a="$thread" -v b="$(thread_ns "$i")" -v c="${t0[i]}" 'BEGIN { print a + (b - c) / 1e9 }')
  done
  eval_wall=$(awk -v w="$wall" -v n="$evals" 'BEGIN { printf "%.1f", (n > 0) ? 1000 * w / n : 0 }')
  eval_thread=$(awk -v w="$thread" -v n="$evals" 'BEGIN { printf "%.1f", (n > 0) ? 1000 * w / n : 0 }')
  prom_pct=$(awk -v a="$p0" -v b="$p1" -v t="$tck" -v w="$window" 'BEGIN { printf "%.1f", 100 * (b - a) / t / w }')
  series=$(prom_query 'count(lp_rollout_node_sketch{rollout="ring00"})')
  kb=$(metrics_of 0 | wc -c | awk '{ printf "%.0f", $1 / 1024 }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$wave" "$report_ms" \
    "$(awk -v a="$report_ms" -v b="$check_ms" 'BEGIN { printf "%.2f", a / b }')" "$rate" \
    "$eval_wall" "$eval_thread" "$prom_pct" "$series" "$kb" "$(rss_mb "${rpid[0]}")" \
    "$(rss_mb "$prom_pid")" "$(IFS=/; echo "${counted[*]}")" >>"$rows"
  tail -1 "$rows" >&2
done

summary=$out/summary.md
{
  echo "# node_evidence_bench $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $origin"
  echo
  echo "$replicas replicas, 64 auto-halting rollouts, Prometheus and the interval at ${interval} s, ${window} s watched per wave."
  echo "Reference: GetComponentConfig, $check_ms ms of service CPU per call ($check_rate calls/s, $checks calls)."
  echo
  echo "| nodes | ms CPU per report | / check | reports/s | evaluation wall ms | evaluation thread CPU ms | Prometheus CPU % | sketch series per rollout | /metrics KiB (one replica) | replica RSS MB | Prometheus RSS MB | counted (per replica) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  tail -n +2 "$rows" | awk -F'\t' '{ printf "| %s |", $1; for (i = 2; i <= NF; i++) printf " %s |", $i; printf "\n" }'
} >"$summary"
cat "$summary"
