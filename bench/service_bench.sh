#!/usr/bin/env bash
# Service benchmark: live-patching-service (C++, nghttp2) against a grpc-go 1.33 server doing
# the same work (bench/grpcgo-server), each behind its own HAProxy with
# deploy/haproxy/haproxy.cfg (ALPN routing, TCP passthrough), identity verification ON: the
# token is a real attested document from the IMDS stand-in, both servers trust its signer root.
#
#   bench/service_bench.sh [--rounds N] [--seconds S] [--conns C] [--streams M] [--idle-conns N]
#
#   --rounds N      measured rounds per server (default 3); order A,B then B,A, ...
#   --seconds S     measured seconds per round (default 10; h2load -D), after 1 s of h2load
#                   warm-up on already-open connections (--warm-up-time)
#   --conns C       h2load connections (default 12)
#   --streams M     concurrent streams per connection (default 4, the service's
#                   SETTINGS_MAX_CONCURRENT_STREAMS; h2load does not retry a refused stream):
#                   C*M = 48 in flight
#   --idle-conns N  idle TLS+HTTP/2 connections for the memory figure (default 5000)
#   --trivial       the ceiling: both servers with an empty handler instead (C++:
#                   lps-trivial-bench-server, the service's gRPC set-up; Go: grpcgo-server
#                   --trivial); no identity check, store, metrics or access log in either
#   Ports (env): BENCH_SVC_PORT_BASE=18600 (uses BASE..BASE+7)
#   BENCH_JOBS=2 (ninja -j), BUILD_ROOT=build (build dirs: release, bench-go-server)
#   BENCH_CXX_ENV='VAR=value ...': environment for the C++ server only (e.g.
#   GRPC_POLL_STRATEGY=poll), to try libgrpc's settings without a rebuild
#   BENCH_NO_BUILD=1: run the binaries already in $BUILD_ROOT/release (built by hand, e.g. while
#   someone else's half-done change elsewhere in the tree does not compile)
#
# Throughput: h2load drives unary GetComponentConfig (5-byte gRPC framing + the protobuf
# GetComponentConfigRequest{component_name:"aksNodeController"}) with the attested document in
# `authorization`, through HAProxy, at C*M concurrent streams. calls/s is h2load's req/s over
# the measured window; p50/p99 come from h2load's per-request log (--log-file), with every
# request's HTTP status checked (all must be 200). h2load cannot see grpc-status (a trailer),
# so before the load each server answers real calls made with the SAME token through the same
# proxy (benchclient call: grpc code OK and the expected config) and one
# `hotfix-agent check-hotfix --dry-run` (outcome lpsRead); for the C++ service the
# lp_requests_total{code="OK"} counter must also grow by at least h2load's 200s.
# Memory: VmRSS of each server process (/proc/PID/status), freshly started and idle, then with
# N idle connections opened directly to it (TLS + HTTP/2 preface + SETTINGS, no call).
# Raw h2load output and logs go to bench/out/service/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

rounds=3 seconds=10 conns=12 streams=4 idle_conns=5000 trivial=0
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --conns) conns=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    --idle-conns) idle_conns=$2; shift 2 ;;
    --trivial) trivial=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

base=${BENCH_SVC_PORT_BASE:-18600}
cxx_port=$base go_port=$((base + 1)) cxx_proxy=$((base + 2)) go_proxy=$((base + 3))
api_port=$((base + 4)) imds_port=$((base + 5)) metrics_port=$((base + 6))
jobs=${BENCH_JOBS:-2}
build_root=${BUILD_ROOT:-build}
fqdn='bench-aks-dns-12345678.hcp.eastus.azmk8s.io'
# The service's certificate is for the apiserver FQDN: nodes verify it for the host they dial
# (AgentBaker #9351; they pinned aks-security-patch.data.mcr.microsoft.com before).
lps_name=$fqdn
config='{"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}}'
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY grpc_proxy

out=$root/bench/out/service
work=$out/work
rm -rf "$out" && mkdir -p "$work/etc/components" "$work/node/events"

# pids, idle_pid, the clean-up on exit and log() come from the stack's prologue.
source bench/lib/stack.sh
die() { echo "service_bench: $*" >&2; exit 1; }
wait_port() { stack_wait_port "$1" "$work"; }
stack_ports_free "$base" $((base + 7)) BENCH_SVC_PORT_BASE
stack_raise_fds $((idle_conns + 1000))

# ---------------------------------------------------------------------------------------
log "build (Release; ninja -j$jobs)"
scripts/install-deps.sh --bench >&2
if [[ ${BENCH_NO_BUILD:-0} != 1 ]]; then
  cmake -S . -B "$build_root/release" -G Ninja -DCMAKE_BUILD_TYPE=Release -U HOTFIX_STATIC_DEPS \
    -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
  ninja -j"$jobs" -C "$build_root/release" live-patching-service lps-trivial-bench-server \
    imds-standin hotfix-agent >/dev/null || die "build failed: ninja -C $build_root/release"
fi
bin=$root/$build_root/release/bin
goserver=$(bench/grpcgo-server/build.sh "$root/$build_root/bench-go-server")
benchclient=$(dirname "$goserver")/benchclient

# ---------------------------------------------------------------------------------------
log "stack: certificates, IMDS stand-in, both servers, two HAProxys, apiserver"
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" bench-cluster-ca "$lps_name" "$fqdn"
printf '%s' "$config" >"$work/etc/components/aksNodeController.json"
cat >"$work/node/aks-node-controller-config.json" <<JSON
{
  "version": "v1",
  "api_server_config": {"api_server_name": "$fqdn"},
  "kubernetes_ca_cert": "$(base64 -w0 "$work/etc/ca.pem")"
}
JSON

stack_start_imds "$bin" "$imds_port" "$work/etc/imds-root.pem" "$work/imds.log"

if ((trivial)); then
  cxx_label=trivial-libgrpc++ go_label=trivial-grpc-go
  env ${BENCH_CXX_ENV:-} "$bin/lps-trivial-bench-server" --listen "127.0.0.1:$cxx_port" \
    --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" --config "$config" \
    >"$work/cxx.log" 2>&1 &
  cxx_pid=$!
  pids+=($!)
  "$goserver" --trivial --listen "127.0.0.1:$go_port" --tls-cert "$work/etc/lps.pem" \
    --tls-key "$work/etc/lps.key" --components-dir "$work/etc/components" \
    --attestation-roots "$work/etc/imds-root.pem" >"$work/go.log" 2>&1 &
  go_pid=$!
  pids+=($!)
else
  cxx_label=live-patching-service go_label=grpc-go
  env ${BENCH_CXX_ENV:-} "$bin/live-patching-service" --listen "127.0.0.1:$cxx_port" \
    --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
    --components-dir "$work/etc/components" \
    --attestation-roots "$work/etc/imds-root.pem" --metrics-listen "127.0.0.1:$metrics_port" \
    --max-connections-per-peer 100000 --max-calls-per-connection 1000000000 \
    >"$work/cxx.log" 2>&1 &
  cxx_pid=$!
  pids+=($!)
  "$goserver" --listen "127.0.0.1:$go_port" --tls-cert "$work/etc/lps.pem" \
    --tls-key "$work/etc/lps.key" --components-dir "$work/etc/components" \
    --attestation-roots "$work/etc/imds-root.pem" >"$work/go.log" 2>&1 &
  go_pid=$!
  pids+=($!)
fi
stack_start_apiserver "$api_port" "$work/etc/apiserver.pem" "$work/etc/apiserver.key" \
  "$work/apiserver.log"
for pair in "cxx $cxx_proxy $cxx_port" "go $go_proxy $go_port"; do
  read -r name pport sport <<<"$pair"
  stack_start_haproxy "$pport" "$sport" "$api_port" "$work/haproxy-$name.log"
done
for p in "$cxx_port" "$go_port" "$api_port" "$cxx_proxy" "$go_proxy"; do wait_port "$p"; done
((trivial)) || wait_port "$metrics_port"

labels=("$cxx_label" "$go_label")
declare -A pid_of=([$cxx_label]=$cxx_pid [$go_label]=$go_pid)
declare -A proxy_of=([$cxx_label]=$cxx_proxy [$go_label]=$go_proxy)
declare -A port_of=([$cxx_label]=$cxx_port [$go_label]=$go_port)

# ---------------------------------------------------------------------------------------
log "token (IMDS attested document) and request body"
stack_fetch_token "$imds_port" "$work"
printf '\x00\x00\x00\x00\x13\x0a\x11aksNodeController' >"$work/request.bin"

metric_ok() {  # the C++ service's lp_requests_total{...code="OK"...}, summed
  exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
  printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  awk '/^lp_requests_total\{/ && /code="OK"/ { s += $NF } END { printf "%d\n", s }' <&3
  exec 3<&-
}

log "validation: real calls with the bench's token, and check-hotfix --dry-run, through each proxy"
for label in "${labels[@]}"; do
  "$benchclient" call --addr "127.0.0.1:${proxy_of[$label]}" --token-file "$work/token" --n 3 \
    >"$work/validate-$label.txt" 2>&1 || { cat "$work/validate-$label.txt" >&2; die "$label: calls failed"; }
  grep -qxF "ok OK $config" "$work/validate-$label.txt" ||
    { cat "$work/validate-$label.txt" >&2; die "$label: unexpected answer"; }
  "$bin/hotfix-agent" check-hotfix --dry-run --node-config "$work/node/aks-node-controller-config.json" \
    --nbc-cmd "$work/node/nbc-cmd.sh" --hotfix-pointer "$work/node/pointer-$label.json" \
    --imds-url "http://127.0.0.1:$imds_port/metadata/attested/document?api-version=2025-04-07" \
    --connect-to "127.0.0.1:${proxy_of[$label]}" --events-dir "$work/node/events" \
    --log-file "$work/node/agent.log" --current-version 202604.01.0 \
    >"$work/dryrun-$label.txt" 2>&1 || true
  grep -q 'lpsRead' "$work/dryrun-$label.txt" ||
    { cat "$work/dryrun-$label.txt" >&2; die "$label: check-hotfix --dry-run was not lpsRead"; }
  echo "$label: 3 calls grpc-status OK with the expected config; check-hotfix --dry-run lpsRead" >&2
done

# ---------------------------------------------------------------------------------------
declare -A rss_idle rss_conns
log "memory: VmRSS idle, then with $idle_conns idle TLS connections (direct, no proxy)"
for label in "${labels[@]}"; do
  stack_idle_rss "$benchclient" "${pid_of[$label]}" "${port_of[$label]}" "$idle_conns" "$work" \
    "$label" || die "$label: could not open $idle_conns connections"
  rss_idle[$label]=$idle_rss_kb
  rss_conns[$label]=$held_rss_kb
  echo "$label: VmRSS idle ${rss_idle[$label]} kB, with $idle_conns connections" \
       "${rss_conns[$label]} kB ($held_established established)" >&2
done

# ---------------------------------------------------------------------------------------
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
samples=$out/samples.tsv
printf 'round\tserver\tcalls_per_s\tp50_ms\tp99_ms\tn\tnon200\tserver_cpu_s\n' >"$samples"
# run_h2load LABEL ROUND DURATION [record]
run_h2load() {
  local label=$1 r=$2 dur=$3 record=${4:-} f=$out/h2load-$1-$2
  local ok_before=0 cpu_before cpu_after
  [[ $label == live-patching-service ]] && ok_before=$(metric_ok)
  cpu_before=$(cpu_ticks "${pid_of[$label]}")
  h2load -D "$dur" --warm-up-time=1 -c "$conns" -m "$streams" -t 1 \
    --npn-list=aks-live-patching,h2 -H ":authority: $fqdn" \
    -H 'content-type: application/grpc' -H 'te: trailers' \
    -H "authorization: $(<"$work/token")" -d "$work/request.bin" --log-file "$f.log" \
    "https://127.0.0.1:${proxy_of[$label]}/akslivepatching.v1.LivePatchingService/GetComponentConfig" \
    >"$f.txt" 2>&1 || { cat "$f.txt" >&2; die "$label: h2load failed"; }
  cpu_after=$(cpu_ticks "${pid_of[$label]}")
  [[ -n $record ]] || return 0
  local rps n non200 p50 p99
  rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$f.txt")
  non200=$(awk -F'\t' '$2 != 200 { bad++ } END { print bad + 0 }' "$f.log")
  read -r n p50 p99 < <(cut -f3 "$f.log" | sort -n | awk '
      { t[NR] = $1 / 1000 }
      END {
        n = NR
        i50 = int(0.50 * n); if (i50 < 0.50 * n) i50++
        i99 = int(0.99 * n); if (i99 < 0.99 * n) i99++
        printf "%d %.2f %.2f\n", n, t[i50], t[i99]
      }')
  ((n > 0)) || die "$label round $r: no requests logged"
  ((non200 == 0)) || die "$label round $r: $non200 responses were not HTTP 200 (see $f.txt)"
  if [[ $label == live-patching-service ]]; then
    local ok_after
    ok_after=$(metric_ok)
    ((ok_after - ok_before >= n)) ||
      die "$label round $r: $n HTTP 200s but only $((ok_after - ok_before)) calls with grpc-status OK"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$label" "$rps" "$p50" "$p99" "$n" "$non200" \
    "$(awk -v a="$cpu_before" -v b="$cpu_after" -v t="$tck" 'BEGIN { printf "%.2f", (b - a) / t }')" \
    >>"$samples"
  echo "$label round $r: $rps calls/s, p50 $p50 ms, p99 $p99 ms, $n calls" >&2
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "warm-up: 3 s per server (not recorded)"
for label in "${labels[@]}"; do run_h2load "$label" warmup 3; done
log "throughput: $rounds rounds x ${seconds} s per server, $conns connections x $streams streams"
for ((r = 1; r <= rounds; r++)); do
  order=("${labels[@]}")
  if ((r % 2 == 0)); then order=("${labels[1]}" "${labels[0]}"); fi
  for label in "${order[@]}"; do run_h2load "$label" "$r" "$seconds" record; done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------------------
source bench/lib/tsv.sh  # col, median
summary=$out/summary.md
{
  echo "# service_bench $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'),"\
       "kernel $(uname -r); loadavg before $load_before, after $load_after"
  dirty=$(git status --porcelain -- src cmd CMakeLists.txt bench/grpcgo-server | wc -l)
  echo "tree: $(git rev-parse --short HEAD)$( ((dirty)) && echo " + $dirty uncommitted files")"
  [[ -z ${BENCH_CXX_ENV:-} ]] || echo "C++ server environment: $BENCH_CXX_ENV"
  echo "load: h2load -c $conns -m $streams ($((conns * streams)) streams), $rounds rounds x ${seconds} s per server, alternating"
  declare -A med_rps med_p50 med_p99
  for label in "${labels[@]}"; do
    med_rps[$label]=$(col "$label" 3 | median)
    med_p50[$label]=$(col "$label" 4 | median)
    med_p99[$label]=$(col "$label" 5 | median)
  done
  ratio=$(awk -v a="${med_rps[$cxx_label]}" -v b="${med_rps[$go_label]}" 'BEGIN { printf "%.2f", a / b }')
  verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 1.5) ? "MET" : "MISSED" }')
  echo
  if ((trivial)); then
    echo "**ceiling run (--trivial, empty handlers): median calls/s $cxx_label / $go_label = $ratio**"
  else
    echo "**goal (median calls/s live-patching-service / grpc-go >= 1.50): $verdict, ratio $ratio**"
  fi
  echo
  echo "## throughput and latency per round"
  echo
  echo "| round | server | calls/s | p50 ms | p99 ms | calls | non-200 | server CPU s |"
  echo "|---|---|---|---|---|---|---|---|"
  tail -n +2 "$samples" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
  echo
  echo "## medians over rounds"
  echo
  echo "| server | calls/s | p50 ms | p99 ms | CPU ms per 1000 calls |"
  echo "|---|---|---|---|---|"
  for label in "${labels[@]}"; do
    cpk=$(awk -F'\t' -v s="$label" '$2 == s { c += $8; n += $6 } END { printf "%.0f", c * 1e6 / n }' "$samples")
    echo "| $label | ${med_rps[$label]} | ${med_p50[$label]} | ${med_p99[$label]} | $cpk |"
  done
  awk -v a="${med_rps[$cxx_label]}" -v b="${med_rps[$go_label]}" \
      -v c="${med_p50[$cxx_label]}" -v d="${med_p50[$go_label]}" \
      -v e="${med_p99[$cxx_label]}" -v f="${med_p99[$go_label]}" \
    'BEGIN { printf "| **ratio C++ / Go** | %.2f | %.2f | %.2f | |\n", a / b, c / d, e / f }'
  echo
  echo "## memory (VmRSS, MB)"
  echo
  echo "| server | idle | with $idle_conns idle TLS connections | per connection (kB) |"
  echo "|---|---|---|---|"
  for label in "${labels[@]}"; do
    awk -v l="$label" -v a="${rss_idle[$label]}" -v b="${rss_conns[$label]}" -v n="$idle_conns" \
      'BEGIN { printf "| %s | %.1f | %.1f | %.1f |\n", l, a / 1024, b / 1024, (b - a) / n }'
  done
  awk -v a="${rss_conns[$cxx_label]}" -v b="${rss_conns[$go_label]}" \
    'BEGIN { printf "| **ratio C++ / Go** | | %.2f | |\n", a / b }'
} >"$summary"
cat "$summary"
echo >&2
echo "raw samples: $samples; h2load output: $out/h2load-*; summary: $summary" >&2
