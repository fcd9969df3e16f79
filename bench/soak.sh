#!/usr/bin/env bash
# Soak: live-patching-service (identity ON, a real attested document) behind HAProxy with
# deploy/haproxy/haproxy.cfg, under h2load for SOAK_SECONDS while
#   - the component store is rewritten every second (a new valid aksNodeController.json each
#     time, and every 5th second an invalid one that must be kept out),
#   - connhold (bench/connhold.c) holds idle, silent and slowloris TLS connections through
#     the proxy, and slow ClientHellos straight to the service.
# Asserts: h2load saw no failed or errored request and every response was HTTP 200, the
# service's lp_requests_total{code="OK"} grew by at least h2load's successes and no other
# code appeared, the store generation advanced, the invalid config was never served (a
# checker calls every 2 s), the held connections stayed held, and VmRSS does not grow by more
# than SOAK_RSS_GROWTH_MB across the load (measured with the connections held, before and
# after). The connections' own cost is reported, not bounded: freed memory stays in
# glibc's arenas after they close. The default bound is about what 1,500 connections cost
# (78 kB each on libgrpc): the service's 10 s handshake and first-request timeouts
# (docs/SERVICE.md, "Limits") close the idle, silent, slowloris and slow-hello ones,
# connhold opens them again, so memory churns through the whole load; a leak would keep
# climbing. Prints a summary (also bench/out/soak/summary.md).
#
#   SOAK_SECONDS=180 bench/soak.sh          # the recorded run (docs/RELIABILITY.md)
#   SOAK_SECONDS=20 SOAK_IDLE=300 SOAK_SLOW=100 bench/soak.sh    # the short form
#
# Env: SOAK_SECONDS (180), SOAK_CONNS (12) x SOAK_STREAMS (4: the service's
# SETTINGS_MAX_CONCURRENT_STREAMS; h2load does not retry a refused stream) h2load streams, SOAK_IDLE
# (2000) idle TLS+HTTP/2, SOAK_SILENT (500) TLS then nothing, SOAK_SLOW (500) preface one
# byte per 5 s, SOAK_HELLO (500) ClientHello one byte per 5 s (direct), SOAK_RSS_GROWTH_MB
# (128), SOAK_PORT_BASE (18700, uses BASE..BASE+5), BUILD_ROOT (build; binaries from the
# Release build $BUILD_ROOT/release, which it builds, as the other benches), BENCH_NO_BUILD=1 to
# skip ninja, SOAK_BIN_DIR=DIR: live-patching-service and imds-standin already built in DIR,
# nothing built (scripts/test.sh: build/release/bin, its one Release build).
# One soak at a time: output goes to bench/out/soak/ (ignored by git), wiped at start.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=${SOAK_SECONDS:-180} conns=${SOAK_CONNS:-12} streams=${SOAK_STREAMS:-4}
n_idle=${SOAK_IDLE:-2000} n_silent=${SOAK_SILENT:-500} n_slow=${SOAK_SLOW:-500}
n_hello=${SOAK_HELLO:-500} rss_bound_mb=${SOAK_RSS_GROWTH_MB:-128}
base=${SOAK_PORT_BASE:-18700}
svc_port=$base proxy_port=$((base + 1)) api_port=$((base + 2)) imds_port=$((base + 3))
metrics_port=$((base + 4))
build_root=${BUILD_ROOT:-build}
fqdn='soak-aks-dns-12345678.hcp.eastus.azmk8s.io'
# The service's certificate is for the apiserver FQDN: nodes verify it for the host they dial
# (AgentBaker #9351; they pinned aks-security-patch.data.mcr.microsoft.com before).
lps_name=$fqdn
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY grpc_proxy

out=$root/bench/out/soak
work=$out/work
rm -rf "$out" && mkdir -p "$work/etc/components"

# pids, idle_pid, the clean-up on exit and log() come from the stack's prologue.
source bench/lib/stack.sh
die() { echo "soak: FAIL: $*" >&2; exit 1; }
stack_ports_free "$base" $((base + 5)) SOAK_PORT_BASE
# connhold's sockets, and twice as many in HAProxy (client and server side of each).
stack_raise_fds $((3 * (n_idle + n_silent + n_slow + n_hello) + 2000))

# ---------------------------------------------------------------------------------------
stack_release_bin "${SOAK_BIN_DIR:-}" "$build_root"
connhold=$out/connhold
cc -O2 -Wall -Wextra -Werror -o "$connhold" bench/connhold.c -lssl -lcrypto ||
  die "connhold did not build"

# ---------------------------------------------------------------------------------------
log "stack: certificates, IMDS stand-in, live-patching-service, HAProxy, apiserver"
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" soak-cluster-ca "$lps_name" "$fqdn" >/dev/null
valid_config() { printf '{"hotfixes":{"202604.01":"202604.01.%d"}}' "$1"; }
invalid_config='{"hotfixes":{"202604.01":"not-a-version"}}'
valid_config 0 >"$work/etc/components/aksNodeController.json"

stack_start_imds "$bin" "$imds_port" "$work/etc/imds-root.pem" "$work/imds.log"

# Every connection comes from 127.0.0.1 (HAProxy's and connhold's): the per-peer cap is sized
# for one proxy carrying the whole load, as docs/SERVICE.md says to size it behind a proxy.
# h2load never opens a new connection after a GOAWAY: its connections may make every call of
# the run (a node makes one per connection, the default's 64 is for nodes).
"$bin/live-patching-service" --listen "127.0.0.1:$svc_port" \
  --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
  --components-dir "$work/etc/components" --attestation-roots "$work/etc/imds-root.pem" \
  --max-connections-per-peer 100000 --max-calls-per-connection 1000000000 \
  --metrics-listen "127.0.0.1:$metrics_port" >"$work/service.log" 2>&1 &
svc_pid=$!
pids+=($!)
stack_start_apiserver "$api_port" "$work/etc/apiserver.pem" "$work/etc/apiserver.key" \
  "$work/apiserver.log"
stack_start_haproxy "$proxy_port" "$svc_port" "$api_port" "$work/haproxy.log"
for p in "$svc_port" "$api_port" "$proxy_port" "$metrics_port"; do stack_wait_port "$p" "$work"; done
stack_fetch_token "$imds_port" "$work"
# GetComponentConfigRequest{component_name:"aksNodeController"} in gRPC framing.
printf '\x00\x00\x00\x00\x13\x0a\x11aksNodeController' >"$work/request.bin"

metrics() { curl -sf "http://127.0.0.1:$metrics_port/metrics"; }
metric_sum() {  # NAME [REGEX on the whole line]
  metrics | awk -v n="$1" -v re="${2:-.}" 'index($0, n) == 1 && $0 ~ re { s += $NF } END { printf "%d\n", s }'
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$svc_pid/status"; }
fds() { find "/proc/$svc_pid/fd" -mindepth 1 2>/dev/null | wc -l; }

# One call with grpc-status read from the trailers (h2load cannot see them); prints the
# grpc-status and the served config. Straight to the service: curl offers ALPN
# "h2,http/1.1", which the proxy rightly routes to the apiserver (h2load takes the proxy).
grpc_call() { stack_grpc_call "$fqdn" "$svc_port" "$work"; }

# ---------------------------------------------------------------------------------------
log "sanity: one call through the proxy"
read -r first_status first_body < <(grpc_call)
[[ $first_status == 0 && $first_body == *'"202604.01.0"'* ]] ||
  die "first call: grpc-status $first_status, body $first_body "

sleep 1
rss_start=$(rss_kb)
gen_start=$(metric_sum lp_store_generation)
ok_start=$(metric_sum lp_requests_total 'code="OK"')
notok_start=$(metric_sum lp_requests_total 'code="[^O]')

log "connections: $n_idle idle, $n_silent silent, $n_slow slowloris through the proxy; $n_hello slow ClientHellos direct"
mkfifo "$work/hold.fifo" "$work/hello.fifo"
"$connhold" 127.0.0.1 "$proxy_port" "$fqdn" --idle "$n_idle" --silent "$n_silent" \
  --slow "$n_slow" --report-s 10 <"$work/hold.fifo" >"$work/connhold.out" 2>&1 &
hold_pid=$!
pids+=($!)
exec {hold_fd}>"$work/hold.fifo"
"$connhold" 127.0.0.1 "$svc_port" "$fqdn" --hello "$n_hello" --report-s 10 \
  <"$work/hello.fifo" >"$work/connhold-hello.out" 2>&1 &
hello_pid=$!
pids+=($!)
exec {hello_fd}>"$work/hello.fifo"
for f in connhold connhold-hello; do
  for _ in $(seq 1200); do
    grep -q '^open' "$work/$f.out" && break
    kill -0 "$hold_pid" 2>/dev/null && kill -0 "$hello_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q '^open' "$work/$f.out" || { cat "$work/$f.out" >&2; die "$f could not open its connections"; }
done
sleep 2
rss_held=$(rss_kb)
established=$(ss -Htn state established "( sport = :$svc_port )" | wc -l)
log "holding: $established connections established at the service, VmRSS $((rss_held / 1024)) MB"

# The store rewriter: a new valid config every second, the invalid one every 5th second.
(
  i=0
  while :; do
    i=$((i + 1))
    if ((i % 5 == 0)); then content=$invalid_config; else content=$(valid_config "$i"); fi
    printf '%s' "$content" >"$work/etc/components/.aksNodeController.tmp"
    mv "$work/etc/components/.aksNodeController.tmp" "$work/etc/components/aksNodeController.json"
    echo "$i" >"$work/rewrites"
    ((i % 5 == 0)) && echo "$i" >>"$work/invalid-writes"
    sleep 1
  done
) &
writer_pid=$!
pids+=($!)

# VmRSS every 5 s: growth that levels off (allocator arenas filling) and growth that does not
# (a leak) look the same in two numbers.
(
  t0=$(date +%s)
  while :; do
    echo "$(($(date +%s) - t0)) $(rss_kb)" >>"$work/rss.txt"
    sleep 5
  done
) &
sampler_pid=$!
pids+=($!)

# The checker: a real call every 2 s; the invalid config must never come back.
(
  while :; do
    grpc_call >>"$work/checks.txt"
    sleep 2
  done
) &
checker_pid=$!
pids+=($!)

log "load: h2load ${seconds} s, $conns connections x $streams streams, through the proxy"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
h2load -D "$seconds" -c "$conns" -m "$streams" -t 1 \
  --npn-list=aks-live-patching,h2 -H ":authority: $fqdn" \
  -H 'content-type: application/grpc' -H 'te: trailers' \
  -H "authorization: $(<"$work/token")" -d "$work/request.bin" --log-file "$work/h2load.log" \
  "https://127.0.0.1:$proxy_port/akslivepatching.v1.LivePatchingService/GetComponentConfig" \
  >"$out/h2load.txt" 2>&1 || { cat "$out/h2load.txt" >&2; die "h2load failed"; }
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
kill "$writer_pid" "$checker_pid" "$sampler_pid" 2>/dev/null || true
wait "$writer_pid" "$checker_pid" "$sampler_pid" 2>/dev/null || true

# Let the last rewrite settle and read the counters while the connections are still held.
valid_config 999999 >"$work/etc/components/.aksNodeController.tmp"
mv "$work/etc/components/.aksNodeController.tmp" "$work/etc/components/aksNodeController.json"
sleep 2
rss_loaded=$(rss_kb)
established_end=$(ss -Htn state established "( sport = :$svc_port )" | wc -l)
exec {hold_fd}>&- {hello_fd}>&-
wait "$hold_pid" "$hello_pid" 2>/dev/null || true
sleep 3
rss_end=$(rss_kb)
read -r last_status last_body < <(grpc_call)

# ---------------------------------------------------------------------------------------
gen_end=$(metric_sum lp_store_generation)
ok_end=$(metric_sum lp_requests_total 'code="OK"')
notok_end=$(metric_sum lp_requests_total 'code="[^O]')
rejected_reloads=$(metric_sum lp_store_reloads_total 'result="rejected_files"')
rewrites=$(<"$work/rewrites")
invalid_writes=$(wc -l <"$work/invalid-writes")
rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$out/h2load.txt")
read -r req_total _ req_done req_ok req_failed req_errored req_timeout < <(
  sed -n 's/^requests: \([0-9]*\) total, \([0-9]*\) started, \([0-9]*\) done, \([0-9]*\) succeeded, \([0-9]*\) failed, \([0-9]*\) errored, \([0-9]*\) timeout.*/\1 \2 \3 \4 \5 \6 \7/p' \
    "$out/h2load.txt")
non200=$(awk -F'\t' '$2 != 200 { bad++ } END { print bad + 0 }' "$work/h2load.log")
logged=$(wc -l <"$work/h2load.log")
checks=$(wc -l <"$work/checks.txt")
checks_ok=$(grep -c '^0 .*202604.01.[0-9]' "$work/checks.txt" || true)
served_invalid=$(grep -c 'not-a-version' "$work/checks.txt" || true)
hold_final=$(grep '^final' "$work/connhold.out" | tail -1)
hello_final=$(grep '^final' "$work/connhold-hello.out" | tail -1)
growth_mb=$(awk -v a="$rss_held" -v b="$rss_loaded" 'BEGIN { printf "%.1f", (b - a) / 1024 }')
per_conn_kb=$(awk -v a="$rss_start" -v b="$rss_held" -v n="$established" \
  'BEGIN { printf "%.1f", n ? (b - a) / n : 0 }')
read -r p50 p99 < <(cut -f3 "$work/h2load.log" | sort -n | awk '
    { t[NR] = $1 / 1000 }
    END {
      i50 = int(0.50 * NR); if (i50 < 0.50 * NR) i50++
      i99 = int(0.99 * NR); if (i99 < 0.99 * NR) i99++
      printf "%.2f %.2f\n", t[i50], t[i99]
    }')

failures=()
((req_failed == 0 && req_errored == 0 && req_timeout == 0)) ||
  failures+=("h2load: $req_failed failed, $req_errored errored, $req_timeout timeout")
((req_ok > 0 && req_ok == req_done)) || failures+=("h2load: $req_ok of $req_done succeeded")
((non200 == 0)) || failures+=("$non200 responses were not HTTP 200")
((ok_end - ok_start >= req_ok)) ||
  failures+=("$req_ok HTTP 200s but only $((ok_end - ok_start)) grpc-status OK calls")
((notok_end == notok_start)) || failures+=("$((notok_end - notok_start)) calls ended with a code other than OK")
((gen_end > gen_start)) || failures+=("the store generation did not advance ($gen_start -> $gen_end)")
((served_invalid == 0)) || failures+=("the invalid config was served $served_invalid times")
((checks > 0 && checks_ok == checks)) || failures+=("checker: $checks_ok of $checks calls OK")
((rejected_reloads > 0)) || failures+=("no reload refused the invalid file")
[[ $last_status == 0 && $last_body == *'"202604.01.999999"'* ]] ||
  failures+=("after the soak: grpc-status $last_status, body $last_body")
kill -0 "$svc_pid" 2>/dev/null || failures+=("the service exited")
awk -v g="$growth_mb" -v b="$rss_bound_mb" 'BEGIN { exit !(g <= b) }' ||
  failures+=("VmRSS grew $growth_mb MB (bound $rss_bound_mb MB)")

summary=$out/summary.md
{
  echo "# soak $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "machine: $(nproc) CPUs, loadavg before $load_before, after $load_after;" \
       "tree $(git rev-parse --short HEAD)"
  echo
  echo "| what | figure |"
  echo "|---|---|"
  echo "| load | h2load -c $conns -m $streams through HAProxy, ${seconds} s |"
  echo "| calls/s held | $rps (p50 $p50 ms, p99 $p99 ms) |"
  echo "| calls | $req_total total, $req_ok succeeded, $req_failed failed, $req_errored errored, $req_timeout timeout; non-200 $non200 of $logged logged |"
  echo "| grpc-status OK counted by the service | $((ok_end - ok_start)) (other codes: $((notok_end - notok_start))) |"
  echo "| connections held (idle / silent / slowloris via proxy) | $n_idle / $n_silent / $n_slow; end: ${hold_final#final } |"
  echo "| slow ClientHellos (direct) | $n_hello; end: ${hello_final#final } |"
  echo "| established at the service | $established at start, $established_end at end |"
  echo "| VmRSS (MB) start / with connections / after load / after release | $(awk -v a="$rss_start" -v b="$rss_held" -v c="$rss_loaded" -v d="$rss_end" 'BEGIN { printf "%.1f / %.1f / %.1f / %.1f", a/1024, b/1024, c/1024, d/1024 }') |"
  echo "| VmRSS growth across the load, connections held | $growth_mb MB (bound $rss_bound_mb MB) |"
  echo "| VmRSS per held connection | $per_conn_kb kB |"
  echo "| VmRSS (MB) during the load, every 30 s | $(awk '!(int($1 / 30) in seen) { seen[int($1 / 30)] = 1; printf "%s%.0f", sep, $2 / 1024; sep = " " }' "$work/rss.txt") |"
  echo "| store rewrites (invalid among them) | $rewrites ($invalid_writes) |"
  echo "| store generation | $gen_start -> $gen_end; reloads that refused a file: $rejected_reloads |"
  echo "| checker calls (grpc-status 0, a valid config) | $checks_ok of $checks; invalid config served: $served_invalid |"
  echo
  if ((${#failures[@]})); then
    echo "**FAIL**"
    printf -- '- %s\n' "${failures[@]}"
  else
    echo "**PASS**: zero failed calls, store reloaded, invalid file kept out, connections held, memory bounded"
  fi
} >"$summary"
cat "$summary"
((${#failures[@]} == 0)) || exit 1
