#!/usr/bin/env bash
# Client benchmark: one `check-hotfix` as a whole process, hotfix-agent (C++) against a
# grpc-go 1.33 client that replicates the Go reference's dial (bench/grpcgo-client), both
# through the same local stack scripts/demo.sh starts (HAProxy routing on ALPN, the libgrpc++
# lps-dev-server, an openssl s_server "apiserver", the IMDS stand-in), all on loopback.
#
#   bench/client_bench.sh [--rounds N] [--warmup N] [--give-up-rounds N] [--no-variant]
#
#   --rounds N          measured rounds of the success benchmark (default 200)
#   --warmup N          unrecorded rounds first (default 10): page cache, CPU frequency
#   --give-up-rounds N  rounds of each give-up benchmark (default 3; each costs seconds)
#   --no-variant        skip the extra hotfix-agent row: the build with HOTFIX_STATIC_DEPS
#                       flipped from the project's default (hotfix-agent-static when the default
#                       is OFF, hotfix-agent-shared when it is ON)
#   Ports (env): BENCH_PROXY_PORT=18443 BENCH_LPS_PORT=18051 BENCH_APISERVER_PORT=18444
#                BENCH_IMDS_PORT=18080 BENCH_SILENT_PORT=18445 BENCH_DEAD_PORT=18446
#   BENCH_JOBS=2 (ninja -j), BUILD_ROOT=build (build dirs: bench, bench-variant, bench-go)
#   BENCH_RUN_DIR=bench/out/work: each client's pointer, events and log live in
#                $BENCH_RUN_DIR/client-run. The default is on disk, like /opt/azure on a node;
#                a tmpfs (BENCH_RUN_DIR=/dev/shm) takes the disk, and so fsync, out of it.
#
# What is measured, per run: wall time from spawn to reaped exit and the child's peak RSS
# (wait4 ru_maxrss), by bench/benchutil.c. Runs are INTERLEAVED (A, B, C, then C, B, A, ...)
# so that load from other jobs on this shared machine lands on every client alike. Every run
# is checked (exit 0, exactly one guest-agent event with the expected outcome, and for the
# success benchmark the exact staged pointer) so a failure is never timed as a fast run.
# Raw samples and the summary go to bench/out/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

rounds=200 warmup=10 giveup_rounds=3 variant=1
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --give-up-rounds) giveup_rounds=$2; shift 2 ;;
    --no-variant|--no-static) variant=0; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

proxy_port=${BENCH_PROXY_PORT:-18443}
lps_port=${BENCH_LPS_PORT:-18051}
api_port=${BENCH_APISERVER_PORT:-18444}
imds_port=${BENCH_IMDS_PORT:-18080}
silent_port=${BENCH_SILENT_PORT:-18445}
dead_port=${BENCH_DEAD_PORT:-18446}
jobs=${BENCH_JOBS:-2}
build_root=${BUILD_ROOT:-build}
fqdn='bench-aks-dns-12345678.hcp.eastus.azmk8s.io'
# The service's certificate is for the apiserver FQDN: nodes verify it for the host they dial
# (AgentBaker #9351; they pinned aks-security-patch.data.mcr.microsoft.com before).
lps_name=$fqdn
version=202604.01.0

# Neither client goes through a proxy: IMDS never does, and neither does the service's dial
# (hotfix-agent ignores HTTPS_PROXY there, as the reference's grpc.WithNoProxy() does;
# grpcgo-client passes WithNoProxy too). Unset anyway, so nothing else in the run is proxied.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY grpc_proxy

out=$root/bench/out
work=$out/work
run_dir=${BENCH_RUN_DIR:-$work}/client-run
rm -rf "$work" "$run_dir" && mkdir -p "$work/etc" "$run_dir"

# pids, the clean-up on exit and log() come from the stack's prologue.
source bench/lib/stack.sh
die() { echo "client_bench: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------
log "build (Release; ninja -j$jobs)"
scripts/install-deps.sh --bench >&2
# hotfix-agent as the project builds it by default: -U drops a HOTFIX_STATIC_DEPS cached by an
# earlier configure, so the option's current default applies.
cmake -S . -B "$build_root/bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -U HOTFIX_STATIC_DEPS \
  -DHOTFIX_AGENT_VERSION="$version" >/dev/null
ninja -j"$jobs" -C "$build_root/bench" hotfix-agent lps-dev-server imds-standin >/dev/null
bin=$root/$build_root/bench/bin
agent=$bin/hotfix-agent
default_static=$(sed -n 's/^HOTFIX_STATIC_DEPS:BOOL=//p' "$build_root/bench/CMakeCache.txt")

# The extra row: the same sources with HOTFIX_STATIC_DEPS flipped (tests are not needed
# there). If that configuration does not build, say so and go on without it.
agent_variant='' variant_label='' flip=''
if ((variant)); then
  if [[ $default_static == ON ]]; then flip=OFF variant_label=hotfix-agent-shared
  else flip=ON variant_label=hotfix-agent-static; fi
  if cmake -S . -B "$build_root/bench-variant" -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DHOTFIX_AGENT_VERSION="$version" -DHOTFIX_STATIC_DEPS="$flip" -DHOTFIX_BUILD_TESTS=OFF \
       >"$out/variant-build.log" 2>&1 &&
     ninja -j"$jobs" -C "$build_root/bench-variant" hotfix-agent >>"$out/variant-build.log" 2>&1; then
    agent_variant=$root/$build_root/bench-variant/bin/hotfix-agent
  else
    echo "HOTFIX_STATIC_DEPS=$flip did not build; skipping that row (see $out/variant-build.log)" >&2
  fi
fi

gogrpc=$(bench/grpcgo-client/build.sh "$root/$build_root/bench-go")
mkdir -p "$build_root/bench-tools"
benchutil=$root/$build_root/bench-tools/benchutil
cc -O2 -Wall -Wextra -o "$benchutil" bench/benchutil.c

# The clients under test: label -> binary. hotfix-agent first (A), grpc-go second (B).
labels=(hotfix-agent grpc-go)
declare -A client=([hotfix-agent]=$agent [grpc-go]=$gogrpc)
if [[ -n $agent_variant ]]; then
  labels+=("$variant_label")
  client[$variant_label]=$agent_variant
fi

# ---------------------------------------------------------------------------------------
log "stack: certificates, node config, lps-dev-server, apiserver, IMDS, HAProxy"
for p in "$proxy_port" "$lps_port" "$api_port" "$imds_port" "$silent_port" "$dead_port"; do
  stack_ports_free "$p" "$p" "BENCH_*_PORT (see --help)"
done
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" bench-cluster-ca "$lps_name" "$fqdn"
node_config=$work/etc/aks-node-controller-config.json
cat >"$node_config" <<JSON
{
  "version": "v1",
  "api_server_config": {"api_server_name": "$fqdn"},
  "kubernetes_ca_cert": "$(base64 -w0 "$work/etc/ca.pem")"
}
JSON
printf '{"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}}' \
  >"$work/etc/aksNodeController.json"

"$bin/lps-dev-server" --listen "127.0.0.1:$lps_port" --tls-cert "$work/etc/lps.pem" \
  --tls-key "$work/etc/lps.key" --config-file "$work/etc/aksNodeController.json" \
  >"$work/lps.log" 2>&1 &
pids+=($!)
openssl s_server -quiet -accept "$api_port" -cert "$work/etc/apiserver.pem" \
  -key "$work/etc/apiserver.key" -alpn h2,http/1.1 -www >"$work/apiserver.log" 2>&1 &
pids+=($!)
"$bin/imds-standin" --listen "127.0.0.1:$imds_port" >"$work/imds.log" 2>&1 &
pids+=($!)
LP_FRONTEND_BIND="127.0.0.1:$proxy_port" LP_SERVICE_ADDR="127.0.0.1:$lps_port" \
  LP_APISERVER_ADDR="127.0.0.1:$api_port" LP_NO_PROXY_PROTOCOL=1 \
  haproxy -db -f deploy/haproxy/haproxy.cfg >"$work/haproxy.log" 2>&1 &
pids+=($!)
# The silent peer: accepts TCP, reads, never answers (for both give-up benchmarks).
"$benchutil" silent 127.0.0.1 "$silent_port" >"$work/silent.log" 2>&1 &
pids+=($!)
for p in "$lps_port" "$api_port" "$imds_port" "$proxy_port" "$silent_port"; do
  stack_wait_port "$p" "$work/*.log"
done

imds_ok="http://127.0.0.1:$imds_port/metadata/attested/document?api-version=2025-04-07"
imds_dead="http://127.0.0.1:$dead_port/metadata/attested/document?api-version=2025-04-07"
imds_silent="http://127.0.0.1:$silent_port/metadata/attested/document?api-version=2025-04-07"
seed='{"version":"202604.01.2","scripts_version":"202604.01.1"}'
expected='{"version":"202604.01.2","scripts_version":"202604.01.1","hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}}'

samples=$out/samples.tsv
printf 'bench\tclient\twall_us\tmaxrss_kb\twork_ms\n' >"$samples"

# run_one BENCH LABEL CONNECT_TO IMDS_URL OUTCOME [record]
# Resets the client's pointer, events and log (outside the timed region), runs one
# check-hotfix and verifies it: exit 0, one event with outcome=OUTCOME, and for lpsRead the
# exact staged pointer. Appends the sample when "record" is given.
run_one() {
  local bench=$1 label=$2 connect_to=$3 imds_url=$4 outcome=$5 record=${6:-}
  local d=$run_dir/$label
  mkdir -p "$d/opt" "$d/events"
  printf '%s' "$seed" >"$d/opt/aks-node-controller-hotfix.json"
  rm -f "$d"/events/*.json
  : >"$d/agent.log"
  local line wall rss rc
  line=$("$benchutil" run --stderr "$d/stderr.log" -- "${client[$label]}" check-hotfix \
    --node-config "$node_config" --nbc-cmd "$d/opt/aks-node-controller-nbc-cmd.sh" \
    --hotfix-pointer "$d/opt/aks-node-controller-hotfix.json" --imds-url "$imds_url" \
    --connect-to "$connect_to" --events-dir "$d/events" --log-file "$d/agent.log" \
    --current-version "$version")
  read -r wall rss rc <<<"$line"
  local events=("$d"/events/*.json)
  if [[ $rc != 0 || ${#events[@]} != 1 || ! -f ${events[0]} ]] ||
     ! grep -q "check-hotfix outcome=$outcome" "${events[0]}"; then
    echo "$bench/$label: run failed (exit $rc, events: ${events[*]}); wanted outcome=$outcome" >&2
    cat "${events[@]}" "$d/stderr.log" >&2 2>/dev/null || true
    exit 1
  fi
  if [[ $outcome == lpsRead && $(<"$d/opt/aks-node-controller-hotfix.json") != "$expected" ]]; then
    echo "$bench/$label: staged pointer differs: $(<"$d/opt/aks-node-controller-hotfix.json")" >&2
    exit 1
  fi
  # The event's durationMs is the client's own clock from "check-hotfix started" to the end
  # of the workflow: wall minus that is process start-up, flag parsing and exit.
  local took
  took=$(grep -o 'durationMs=[0-9]*' "${events[0]}" | cut -d= -f2)
  # Keep one event message per bench/client for the report.
  grep -oE '"Message":"([^"\\]|\\.)*"' "${events[0]}" | sed "s|^|$bench $label |" \
    >>"$out/messages.$bench"
  [[ -n $record ]] && printf '%s\t%s\t%s\t%s\t%s\n' "$bench" "$label" "$wall" "$rss" "$took" \
    >>"$samples"
  return 0
}

# interleave BENCH N CONNECT_TO IMDS_URL OUTCOME [record]: N rounds over all clients, order
# reversed every other round.
interleave() {
  local bench=$1 n=$2 i label order
  shift 2
  for ((i = 0; i < n; i++)); do
    order=("${labels[@]}")
    if ((i % 2)); then mapfile -t order < <(printf '%s\n' "${labels[@]}" | tac); fi
    for label in "${order[@]}"; do run_one "$bench" "$label" "$@"; done
  done
}

# The startup cost alone: `--version` of each client, interleaved the same way.
startup() {
  local n=$1 i label line wall rss rc
  for ((i = 0; i < n; i++)); do
    for label in "${labels[@]}"; do
      line=$("$benchutil" run -- "${client[$label]}" --version)
      read -r wall rss rc <<<"$line"
      [[ $rc == 0 ]] || { echo "$label --version exited $rc" >&2; exit 1; }
      printf 'startup\t%s\t%s\t%s\t-\n' "$label" "$wall" "$rss" >>"$samples"
    done
  done
}

rm -f "$out"/messages.*
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "success: $warmup warm-up + $rounds measured rounds of ${labels[*]}"
interleave success "$warmup" "127.0.0.1:$proxy_port" "$imds_ok" lpsRead
interleave success "$rounds" "127.0.0.1:$proxy_port" "$imds_ok" lpsRead record
log "startup (--version): $rounds rounds"
startup "$rounds"
log "give up: silent peer on --connect-to ($giveup_rounds rounds)"
interleave silent-peer "$giveup_rounds" "127.0.0.1:$silent_port" "$imds_ok" failed record
log "give up: dead IMDS, nothing listening ($giveup_rounds rounds)"
stack_ports_free "$dead_port" "$dead_port" "BENCH_*_PORT (see --help)"
interleave dead-imds "$giveup_rounds" "127.0.0.1:$proxy_port" "$imds_dead" failed record
log "give up: silent IMDS, accepts and never answers ($giveup_rounds rounds)"
interleave silent-imds "$giveup_rounds" "127.0.0.1:$proxy_port" "$imds_silent" failed record
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------------------
# Statistics: n, mean, median, p90 (nearest rank), sample stddev, min; wall in ms, RSS in MB.
stats() {  # stdin: numbers; $1: divisor
  sort -n | awk -v div="$1" '
    { v[NR] = $1 / div; s += v[NR] }
    END {
      n = NR; mean = s / n
      for (i = 1; i <= n; i++) ss += (v[i] - mean) ^ 2
      med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      p = int(0.9 * n); if (p < 0.9 * n) p++; if (p < 1) p = 1
      printf "%d %.2f %.2f %.2f %.2f %.2f\n", n, mean, med, v[p], (n > 1 ? sqrt(ss / (n - 1)) : 0), v[1]
    }'
}
column_of() { awk -F'\t' -v b="$1" -v c="$2" -v k="$3" '$1 == b && $2 == c { print $k }' "$samples"; }

summary=$out/summary.md
{
  echo "# client_bench $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'),"\
       "kernel $(uname -r); loadavg before $load_before, after $load_after"
  echo "clients: ${labels[*]}; rounds: $rounds success (+$warmup warm-up), $giveup_rounds give-up"
  echo "hotfix-agent: HOTFIX_STATIC_DEPS=${default_static:-unset} (the project's default)," \
       "$(ldd "$agent" | grep -c '=>') shared libraries: $(ldd "$agent" | awk '/=>/ { printf "%s ", $1 }')"
  if [[ -n $agent_variant ]]; then
    echo "$variant_label: HOTFIX_STATIC_DEPS=$flip, $(ldd "$agent_variant" | grep -c '=>') shared libraries"
  fi
  dirty=$(git status --porcelain -- src cmd CMakeLists.txt tests/support deploy | wc -l)
  echo "client state (pointer, events, log) in $run_dir: $(stat -f -c %T "$run_dir")"
  echo "tree: $(git rev-parse --short HEAD)$( ((dirty)) && echo " + $dirty uncommitted files under src cmd tests/support deploy")"
  # The project's goal: hotfix-agent's whole-process wall time at most half grpc-go's.
  read -r _ _ med_a _ < <(column_of success hotfix-agent 3 | stats 1000)
  read -r _ _ med_b _ < <(column_of success grpc-go 3 | stats 1000)
  goal_ratio=$(awk -v a="$med_a" -v b="$med_b" 'BEGIN { printf "%.2f", a / b }')
  verdict=$(awk -v r="$goal_ratio" 'BEGIN { print (r <= 0.5) ? "MET" : "MISSED" }')
  echo
  echo "**goal (median wall hotfix-agent / grpc-go <= 0.50): $verdict, ratio $goal_ratio**"
  for bench in success startup silent-peer dead-imds silent-imds; do
    metrics=(wall rss work)
    [[ $bench == startup ]] && metrics=(wall rss)
    for metric in "${metrics[@]}"; do
      case $metric in
        wall) k=3 div=1000 unit=ms what="whole process, spawn to exit" ;;
        rss) k=4 div=1024 unit=MB what="peak RSS" ;;
        work) k=5 div=1 unit=ms what="the event's durationMs: started .. workflow done" ;;
      esac
      echo
      echo "## $bench: $metric ($unit; $what)"
      echo
      echo "| client | n | mean | median | p90 | stddev | min |"
      echo "|---|---|---|---|---|---|---|"
      declare -A mean=() med=() p90=()
      for label in "${labels[@]}"; do
        read -r n m md p sd mn < <(column_of "$bench" "$label" "$k" | stats "$div")
        mean[$label]=$m med[$label]=$md p90[$label]=$p
        echo "| $label | $n | $m | $md | $p | $sd | $mn |"
      done
      for label in "${labels[@]}"; do
        [[ $label == grpc-go ]] && continue
        awk -v a="${mean[$label]}" -v b="${mean[grpc-go]}" -v c="${med[$label]}" \
            -v d="${med[grpc-go]}" -v e="${p90[$label]}" -v f="${p90[grpc-go]}" -v l="$label" \
          'function r(x, y) { return y > 0 ? sprintf("%.2f", x / y) : "n/a" }
           BEGIN { printf "| **ratio %s / grpc-go** | | %s | %s | %s | | |\n", l, r(a, b), r(c, d), r(e, f) }'
      done
      unset mean med p90
    done
  done
  echo
  echo "## outcome messages (one per bench and client)"
  echo
  for f in "$out"/messages.*; do sort -u -k1,2 "$f" | sed 's/^/    /'; done
} >"$summary"
cat "$summary"
echo >&2
echo "raw samples: $samples; summary: $summary" >&2
