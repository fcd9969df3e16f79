#!/usr/bin/env bash
# Node-boot benchmark: live-patching-service (C++) against the grpc-go server doing the same
# work (bench/grpcgo-server), under the load a fleet of booting nodes makes: every call is a
# NEW TCP connection and a full TLS handshake (no resumption; SNI = the apiserver's name, ALPN
# aks-live-patching,h2), ONE unary GetComponentConfig whose `authorization` is a DISTINCT,
# validly signed IMDS attested document (so both servers' identity caches miss and each call
# pays a full base64 + PKCS#7 signature + chain verification), then the connection closes.
# Both servers are reached directly on loopback (or each through its own HAProxy with
# deploy/haproxy/haproxy.cfg: --through-haproxy), identity verification ON.
#
#   bench/node_boot_bench.sh [--rounds N] [--seconds S] [--parallel P] [--warm-up S]
#                            [--tokens N] [--signer ec|rsa] [--idle-conns N]
#                            [--through-haproxy] [--profile S] [--refused] [--client go|cxx]
#
#   --rounds N        measured rounds per server (default 3); order A,B then B,A, ...
#   --seconds S       seconds per round during which calls are started (default 10)
#   --parallel P      connecting workers in the load generator (default 32): enough to keep
#                     the server busy (each worker waits for its call's answer, then reconnects)
#   --warm-up S       unrecorded load per server before the rounds (default 2)
#   --tokens N        the pool of distinct documents (default 4000 per second of load per
#                     server, warm-up and profile included: more than this machine manages,
#                     the C++ service's ~2,400 calls/s with room);
#                     each is used once per server; a round that runs out fails (raise it)
#   --signer ec|rsa   ec (default): an ECDSA P-256 signer under an ECDSA root, as the IMDS
#                     stand-in makes (tests/support/imds_standin.cc); rsa: an RSA-2048 signer
#                     under an RSA-2048 intermediate and root, as Azure's IMDS (the roots file
#                     then holds root + intermediate, as src/service/identity/node_identity.h says)
#   --idle-conns N    idle TLS+HTTP/2 connections for the memory figure (default 2000)
#   --through-haproxy each server behind its own HAProxy (deploy/haproxy/haproxy.cfg); HAProxy's
#                     CPU per call is reported too. Default: direct, the headline figure.
#   --client go|cxx   the load generator: go (default), `benchclient boot` below; cxx,
#                     bench/boot_client.cc, the node's own client (hotfix-agent check-hotfix's
#                     fetch path: node config, CA, TLS dialer, HTTP/2 call) in P threads
#   --refused         after the rounds, two more per server of the same length: every call a
#                     document from a signer under a root neither server trusts, (a) the same
#                     one each time (the service refuses it from its refusal cache for a
#                     hash) and (b) a distinct one each time (the full check fails at the
#                     chain); a call counts when answered UNAUTHENTICATED. The summary gives
#                     CPU per refused call and its share of a good call's (issue 19's goal
#                     for the identity step: at most 10 %); then (c) the same document from
#                     one address through HAProxy sending the PROXY header to the service run
#                     with --proxy-protocol (refused peers shed before TLS): CPU per attempt
#   --profile S       after the rounds, one more (unrecorded) round of S s per server under
#                     `perf record` with call graphs; the summary gets where each server's
#                     CPU goes, bench/out/node-boot/perf-{cxx,go}-*.txt the full reports
#   Ports (env): BENCH_BOOT_PORT_BASE=18700 (uses BASE..BASE+8)
#   BENCH_JOBS=1 (nice -n 10 ninja -j), BUILD_ROOT=build (build dirs: release, bench-go-server,
#   bench-tools)
#   BENCH_CXX_BIN=/path/live-patching-service: run this prebuilt service binary, build nothing
#   in C++ (e.g. HEAD's, built in a `git worktree` while src/service is mid-rewrite); the
#   imds-standin next to it, if any, serves the cross-check token
#   BENCH_NO_BUILD=1: the binaries already in $BUILD_ROOT/release
#   BENCH_CXX_ENV='VAR=value ...': environment for the C++ server only
#
# The pool: bench/mint_tokens.c (cc, libcrypto) signs N documents before any measurement with
# the very call the IMDS stand-in uses (PKCS7_sign, content attached, signer certificate
# embedded, PKCS7_BINARY): the stand-in's JSON with vmId ...-b007-4000-8000-<i> and nonce
# boot-<i>, createdOn now, expiresOn now + 6 h. Its signer root is the --attestation-roots of
# both servers. One imds-standin with the same signer serves a document for the cross-check.
# The load generator: `benchclient boot` (bench/grpcgo-server/benchclient, Go: crypto/tls +
# golang.org/x/net/http2 framer and hpack, no grpc-go channel per call) with hotfix-agent's
# request headers; each call must end with :status 200, grpc-status 0 in the trailers and the
# served config; every other outcome is counted and fails the run. Each server has its own
# cursor into the pool, so every document is verified once by each server.
# Validation before measuring, on each server: a grpc-go `benchclient call` with the stand-in's
# document (OK and the config); 3 documents from a signer under a root neither server trusts
# (all UNAUTHENTICATED: verification is on). After the rounds: in each server's access log
# every OK call of the pool carries a distinct vmId (no document was answered twice).
# Per round: the server's utime+stime (/proc/PID/stat) before and after -> ms CPU per OK
# call and OK calls per server CPU-second (the headline: C++ / Go of that, goal >= 1.5);
# calls/s = OK calls / wall time from the first dial to the last answer; the load
# generator's own CPU (getrusage) and the machine's idle share (/proc/stat), since the load
# generator shares the 2 vCPUs with the server under test.
# Memory: VmRSS of each freshly started server, then with N idle connections opened directly
# to it (`benchclient idle`: TLS + HTTP/2 preface + SETTINGS, no call), and after the rounds.
# Raw output goes to bench/out/node-boot/ (ignored by git); the summary (markdown, stdout)
# also to bench/out/node-boot/summary.md. Exit status 1 when any call failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

rounds=3 seconds=10 parallel=32 warmup=2 tokens='' signer=ec idle_conns=2000 via_proxy=0
profile=0 refused=0 client=go
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --warm-up) warmup=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --signer) signer=$2; shift 2 ;;
    --idle-conns) idle_conns=$2; shift 2 ;;
    --through-haproxy) via_proxy=1; shift ;;
    --profile) profile=$2; shift 2 ;;
    --refused) refused=1; shift ;;
    --client) client=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in rounds seconds parallel warmup idle_conns profile; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "--${v//_/-} wants a whole number" >&2; exit 2; }
done
((rounds >= 1 && seconds >= 1 && parallel >= 1 && idle_conns >= 1)) ||
  { echo "--rounds, --seconds, --parallel and --idle-conns must be at least 1" >&2; exit 2; }
[[ $signer == ec || $signer == rsa ]] || { echo "--signer is ec or rsa" >&2; exit 2; }
[[ $client == go || $client == cxx ]] || { echo "--client is go or cxx" >&2; exit 2; }
[[ -n $tokens ]] || tokens=$(((rounds * seconds + warmup + profile) * 4000))
if ! [[ $tokens =~ ^[0-9]+$ ]] || ((tokens < 100)); then echo "--tokens wants at least 100" >&2; exit 2; fi

base=${BENCH_BOOT_PORT_BASE:-18700}
cxx_port=$base go_port=$((base + 1)) cxx_proxy=$((base + 2)) go_proxy=$((base + 3))
api_port=$((base + 4)) imds_port=$((base + 5)) metrics_port=$((base + 6))
shed_port=$((base + 7)) shed_proxy=$((base + 8))
jobs=${BENCH_JOBS:-1}
build_root=${BUILD_ROOT:-build}
fqdn='bench-aks-dns-12345678.hcp.eastus.azmk8s.io'
# The service's certificate is for the apiserver FQDN: nodes verify it for the host they dial
# (AgentBaker #9351; they pinned aks-security-patch.data.mcr.microsoft.com before).
lps_name=$fqdn
config='{"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}}'
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY grpc_proxy

out=$root/bench/out/node-boot
work=$out/work
rm -rf "$out" && mkdir -p "$work/etc/components" "$work/pki"

# pids, idle_pid, the clean-up on exit and log() come from the stack's prologue.
source bench/lib/stack.sh
die() { echo "node_boot_bench: $*" >&2; exit 1; }
stack_ports_free "$base" $((base + 7)) BENCH_BOOT_PORT_BASE
stack_raise_fds $((idle_conns + parallel + 1000))

# ---------------------------------------------------------------------------------------
log "build (Release; nice -n 10 ninja -j$jobs)"
scripts/install-deps.sh --bench >&2
if [[ -n ${BENCH_CXX_BIN:-} ]]; then
  cxx_bin=$(realpath "$BENCH_CXX_BIN")
  [[ -x $cxx_bin ]] || die "BENCH_CXX_BIN=$BENCH_CXX_BIN is not an executable"
  rev=$(git -C "$(dirname "$cxx_bin")" rev-parse --short HEAD 2>/dev/null || true)
  cxx_origin="prebuilt $cxx_bin${rev:+ (its checkout is at $rev)}"
else
  if [[ ${BENCH_NO_BUILD:-0} != 1 ]]; then
    cmake -S . -B "$build_root/release" -G Ninja -DCMAKE_BUILD_TYPE=Release -U HOTFIX_STATIC_DEPS \
      -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
    nice -n 10 ninja -j"$jobs" -C "$build_root/release" live-patching-service imds-standin boot-client \
      >"$out/ninja.log" 2>&1 ||
      die "build failed (see $out/ninja.log). To bench the last commit instead:
  git worktree add --detach /tmp/lps-head HEAD && cd /tmp/lps-head &&
  cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOTFIX_AGENT_VERSION=202604.01.0 &&
  nice -n 10 ninja -j1 -C build/release live-patching-service imds-standin
  then BENCH_CXX_BIN=/tmp/lps-head/build/release/bin/live-patching-service $0"
  fi
  cxx_bin=$root/$build_root/release/bin/live-patching-service
  [[ -x $cxx_bin ]] || die "no $cxx_bin (BENCH_NO_BUILD=1 without a build?)"
  cxx_origin="$build_root/release"
fi
imds_bin=$(dirname "$cxx_bin")/imds-standin
boot_client=$root/$build_root/release/bin/boot-client
[[ $client == go || -x $boot_client ]] || die "--client cxx: no $boot_client (build boot-client)"
[[ -x $imds_bin ]] || imds_bin=''
stack_bench_tools "$build_root"

# ---------------------------------------------------------------------------------------
log "PKI: the service's TLS certificate, the attested documents' signer ($signer) and its roots"
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" bench-cluster-ca "$lps_name" "$fqdn"
printf '%s' "$config" >"$work/etc/components/aksNodeController.json"
stack_imds_pki "$work/pki" "$signer"
# The node config --client cxx reads, as a node's: the apiserver's name and the cluster CA.
printf '{"version":"v1","api_server_config":{"api_server_name":"%s"},"kubernetes_ca_cert":"%s"}\n' \
  "$fqdn" "$(base64 -w0 "$work/etc/ca.pem")" >"$work/node-config.json"
# A second root and signer that neither server trusts (validation only).
stack_imds_pki "$work/pki-untrusted" "$signer"

log "token pool: $tokens distinct attested documents (not timed)"
pool=$work/tokens.txt
stack_mint_pool "$mint" "$work/pki" "$tokens" "$pool"
"$mint" "$work/pki-untrusted/signer.pem" "$work/pki-untrusted/signer.key" 3 >"$work/untrusted.txt" \
  2>/dev/null || die "mint_tokens (untrusted) failed"
token_bytes=$(head -1 "$pool" | tr -d '\n' | wc -c)

# ---------------------------------------------------------------------------------------
log "servers: live-patching-service ($cxx_origin) and grpcgo-server$( ((via_proxy)) && echo ', each behind HAProxy')"
cxx_label=live-patching-service go_label=grpc-go
cxx_extra=()
# The nghttp2 server (after 4574b73) caps connections per source address (default 512); every
# connection here comes from 127.0.0.1, the idle ones for the memory figure included.
if "$cxx_bin" --help 2>&1 | grep -q -- --max-connections-per-peer; then
  cxx_extra+=(--max-connections-per-peer $((idle_conns + parallel + 100)))
fi
# shellcheck disable=SC2086  # BENCH_CXX_ENV is a list of VAR=value words
env ${BENCH_CXX_ENV:-} "$cxx_bin" --listen "127.0.0.1:$cxx_port" \
  --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
  --components-dir "$work/etc/components" --attestation-roots "$work/pki/roots.pem" \
  --metrics-listen "127.0.0.1:$metrics_port" "${cxx_extra[@]}" >"$work/cxx.log" 2>&1 &
cxx_pid=$!
pids+=($!)
"$goserver" --listen "127.0.0.1:$go_port" --tls-cert "$work/etc/lps.pem" \
  --tls-key "$work/etc/lps.key" --components-dir "$work/etc/components" \
  --attestation-roots "$work/pki/roots.pem" >"$work/go.log" 2>&1 &
go_pid=$!
pids+=($!)
for p in "$cxx_port" "$go_port" "$metrics_port"; do stack_wait_port "$p" "$work"; done
labels=("$cxx_label" "$go_label")
declare -A pid_of=([$cxx_label]=$cxx_pid [$go_label]=$go_pid)
declare -A port_of=([$cxx_label]=$cxx_port [$go_label]=$go_port)
declare -A addr_of=([$cxx_label]=127.0.0.1:$cxx_port [$go_label]=127.0.0.1:$go_port)
declare -A proxy_pid_of=()
if ((via_proxy)); then
  stack_start_apiserver "$api_port" "$work/etc/apiserver.pem" "$work/etc/apiserver.key" \
    "$work/apiserver.log"
  for pair in "$cxx_label $cxx_proxy $cxx_port" "$go_label $go_proxy $go_port"; do
    read -r label pport sport <<<"$pair"
    stack_start_haproxy "$pport" "$sport" "$api_port" "$work/haproxy-$label.log"
    proxy_pid_of[$label]=${pids[-1]}
    addr_of[$label]=127.0.0.1:$pport
    stack_wait_port "$pport" "$work"
  done
fi

# ---------------------------------------------------------------------------------------
log "validation on each server: a stand-in document (grpc-go client), 3 untrusted documents"
if [[ -n $imds_bin ]]; then
  "$imds_bin" --listen "127.0.0.1:$imds_port" --signer-cert "$work/pki/signer.pem" \
    --signer-key "$work/pki/signer.key" >"$work/imds.log" 2>&1 &
  pids+=($!)
  stack_wait_port "$imds_port" "$work/imds.log"
  stack_fetch_token "$imds_port" "$work"
else
  echo "no imds-standin next to $cxx_bin: the cross-check uses a pool-style token instead" >&2
  "$mint" "$work/pki/signer.pem" "$work/pki/signer.key" 1 0xc0ffee >"$work/token" 2>/dev/null
fi
for label in "${labels[@]}"; do
  "$benchclient" call --addr "${addr_of[$label]}" --token-file "$work/token" --n 3 \
    >"$work/validate-$label.txt" 2>&1 || { cat "$work/validate-$label.txt" >&2; die "$label: calls failed"; }
  (($(grep -cxF "ok OK $config" "$work/validate-$label.txt") == 3)) ||
    { cat "$work/validate-$label.txt" >&2; die "$label: unexpected answer"; }
  "$benchclient" boot --addr "${addr_of[$label]}" --tokens-file "$work/untrusted.txt" \
    --parallel 1 --seconds 30 --server-name "$fqdn" >"$work/validate-untrusted-$label.txt" 2>&1 ||
    true
  grep -q '^codes UNAUTHENTICATED=3$' "$work/validate-untrusted-$label.txt" ||
    { cat "$work/validate-untrusted-$label.txt" >&2; die "$label: untrusted documents were not all refused"; }
  echo "$label: stand-in document OK with the config (3 calls); 3 untrusted documents UNAUTHENTICATED" >&2
done

# ---------------------------------------------------------------------------------------
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
declare -A rss_idle rss_conns rss_after
log "memory: VmRSS idle, then with $idle_conns idle TLS connections (direct)"
for label in "${labels[@]}"; do
  stack_idle_rss "$benchclient" "${pid_of[$label]}" "${port_of[$label]}" "$idle_conns" "$work" \
    "$label" || die "$label: could not open $idle_conns connections"
  rss_idle[$label]=$idle_rss_kb
  rss_conns[$label]=$held_rss_kb
  echo "$label: VmRSS idle ${rss_idle[$label]} kB, with $idle_conns connections ${rss_conns[$label]} kB" >&2
done

# ---------------------------------------------------------------------------------------
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
machine() { awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }
tck=$(getconf CLK_TCK)
declare -A cursor=([$cxx_label]=0 [$go_label]=0)
samples=$out/samples.tsv
printf 'round\tserver\tok\tfailed\telapsed_s\tcalls_per_s\tserver_cpu_s\tms_cpu_per_call\tcalls_per_cpu_s\tclient_cpu_s\tmachine_idle_pct\tp50_ms\tp99_ms\tproxy_cpu_s\n' >"$samples"
failures=0
# get NAME: the NAME=VALUE field of the caller's $line (a load generator's `result` line).
get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
# load ADDR ARGS...: the load generator --client names, with the arguments both take
# (--tokens-file, --skip, --parallel, --seconds, --expect, --want-code).
load() {
  local addr=$1
  shift
  if [[ $client == cxx ]]; then
    "$boot_client" --node-config "$work/node-config.json" --connect-to "$addr" "$@"
  else
    "$benchclient" boot --addr "$addr" --server-name "$fqdn" "$@"
  fi
}
# run_boot LABEL ROUND SECONDS [record]: one round of the boot load against LABEL.
run_boot() {
  local label=$1 r=$2 dur=$3 record=${4:-} f=$out/boot-$1-$2.txt
  local cpu0 cpu1 m0 m1 px0=0 px1=0 rc=0
  sleep 1  # the previous round's connections are gone
  cpu0=$(cpu_ticks "${pid_of[$label]}")
  [[ -n ${proxy_pid_of[$label]:-} ]] && px0=$(cpu_ticks "${proxy_pid_of[$label]}")
  m0=$(machine)
  load "${addr_of[$label]}" --tokens-file "$pool" --skip "${cursor[$label]}" \
    --parallel "$parallel" --seconds "$dur" --expect "$config" >"$f" 2>"$f.err" || rc=$?
  sleep 0.5  # the server finishes closing the last connections
  cpu1=$(cpu_ticks "${pid_of[$label]}")
  [[ -n ${proxy_pid_of[$label]:-} ]] && px1=$(cpu_ticks "${proxy_pid_of[$label]}")
  m1=$(machine)
  local line
  line=$(grep '^result ' "$f") || { cat "$f" "$f.err" >&2; die "$label round $r: benchclient boot failed (rc $rc)"; }
  local ok bad used exhausted
  ok=$(get ok) bad=$(get failed) used=$(get tokens_used) exhausted=$(get exhausted)
  cursor[$label]=$((cursor[$label] + used))
  if ((bad > 0)); then
    failures=$((failures + bad))
    echo "$label round $r: $bad FAILED calls: $(grep -E '^(codes|errors) ' "$f" | tr '\n' ' ')" >&2
    head -5 "$f.err" >&2
  fi
  if ((exhausted)); then
    failures=$((failures + 1))
    echo "$label round $r: the token pool ran out after ${cursor[$label]} (raise --tokens)" >&2
  fi
  ((ok > 0)) || die "$label round $r: no successful call (see $f, $f.err)"
  [[ -n $record ]] || return 0
  awk -F'\t' -v r="$r" -v l="$label" -v ok="$ok" -v bad="$bad" -v el="$(get elapsed_s)" \
      -v cps="$(get calls_per_s)" -v c0="$cpu0" -v c1="$cpu1" -v t="$tck" \
      -v cc="$(get client_cpu_s)" -v m0="$m0" -v m1="$m1" -v p50="$(get p50_ms)" \
      -v p99="$(get p99_ms)" -v x0="$px0" -v x1="$px1" 'BEGIN {
        split(m0, a, " "); split(m1, b, " ")
        cpu = (c1 - c0) / t
        idle = (b[1] > a[1]) ? 100 * (b[2] - a[2]) / (b[1] - a[1]) : 0
        printf "%s\t%s\t%d\t%d\t%.3f\t%.1f\t%.2f\t%.3f\t%.1f\t%.2f\t%.1f\t%s\t%s\t%.2f\n",
          r, l, ok, bad, el, cps, cpu, 1000 * cpu / ok, ok / cpu, cc, idle, p50, p99, (x1 - x0) / t
      }' >>"$samples"
  tail -1 "$samples" | awk -F'\t' '{ printf "%s round %s: %d OK, %s calls/s, %.3f ms CPU per call, %.0f calls per CPU-s, client CPU %s s, machine idle %s %%\n", $2, $1, $3, $6, $8, $9, $10, $11 }' >&2
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
if ((warmup > 0)); then
  log "warm-up: $warmup s per server (not recorded)"
  for label in "${labels[@]}"; do run_boot "$label" warmup "$warmup"; done
fi
log "node boots: $rounds rounds x $seconds s per server, $parallel connecting workers, alternating"
for ((r = 1; r <= rounds; r++)); do
  order=("${labels[@]}")
  if ((r % 2 == 0)); then order=("${labels[1]}" "${labels[0]}"); fi
  for label in "${order[@]}"; do run_boot "$label" "$r" "$seconds" record; done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
for label in "${labels[@]}"; do rss_after[$label]=$(rss_kb "${pid_of[$label]}"); done

# Every OK call of the pool carried its own document: as many distinct pool vmIds as OK lines.
declare -A distinct_of
for label in "${labels[@]}"; do
  logf=$work/cxx.log
  [[ $label == "$go_label" ]] && logf=$work/go.log
  read -r lines distinct < <(grep '"code":"OK"' "$logf" |
    grep -o '"vm_id":"[0-9a-f]*-b007-4000-8000-[0-9a-f]*"' | grep -v '"vm_id":"00c0ffee-' |
    sort | uniq -c |
    awk '{ n += $1; d++ } END { print n + 0, d + 0 }')
  distinct_of[$label]="$distinct of $lines"
  ((lines == distinct)) ||
    { failures=$((failures + 1)); echo "$label: $lines OK pool calls but $distinct distinct documents" >&2; }
done

# --refused: refused calls, CPU per call, beside a good call's.
refused_tsv=$out/refused.tsv
if ((refused)); then
  n=$((seconds * 4000))
  log "refused calls: $seconds s per server, a repeated untrusted document, then distinct ones"
  yes "$(head -1 "$work/untrusted.txt")" | head -n "$n" >"$work/refused-repeat.txt" || true
  stack_mint_pool "$mint" "$work/pki-untrusted" "$n" "$work/refused-distinct.txt"
  printf 'server\tkind\trefused\tfailed\tcalls_per_s\tserver_cpu_s\tms_cpu_per_call\n' >"$refused_tsv"
  # refused_load PID ADDR TOKENS FILE: the untrusted documents' load against ADDR, its output in
  # FILE; sets `line` (the load generator's result) and `cpu_s` (PID's CPU over the load).
  refused_load() {
    local c0 c1
    sleep 1
    c0=$(cpu_ticks "$1")
    load "$2" --tokens-file "$3" --parallel "$parallel" --seconds "$seconds" --want-code 16 \
      >"$4" 2>"$4.err" || true
    sleep 0.5
    c1=$(cpu_ticks "$1")
    line=$(grep '^result ' "$4") || die "refused calls: benchclient boot failed (see $4.err)"
    cpu_s=$(awk -v a="$c0" -v b="$c1" -v t="$tck" 'BEGIN { print (b - a) / t }')
  }
  for label in "${labels[@]}"; do
    for kind in repeat distinct; do
      f=$out/refused-$kind-${label}.txt
      refused_load "${pid_of[$label]}" "${addr_of[$label]}" "$work/refused-$kind.txt" "$f"
      ok=$(get ok) bad=$(get failed) cps=$(get calls_per_s)
      ((ok > 0)) || die "$label refused ($kind): no call answered UNAUTHENTICATED (see $f)"
      if ((bad > 0)); then
        failures=$((failures + bad))
        echo "$label refused ($kind): $bad calls not answered UNAUTHENTICATED" >&2
      fi
      awk -v l="$label" -v k="$kind" -v ok="$ok" -v bad="$bad" -v cps="$cps" -v cpu="$cpu_s" \
          'BEGIN { printf "%s\t%s\t%d\t%d\t%s\t%.2f\t%.3f\n", l, k, ok, bad, cps, cpu, 1000 * cpu / ok }' \
        >>"$refused_tsv"
      tail -1 "$refused_tsv" | awk -F'\t' '{ printf "%s refused (%s): %d calls, %s/s, %.3f ms CPU per call\n", $1, $2, $3, $5, $7 }' >&2
    done
  done
  # (c) The same repeating attacker against the service as shipped: behind HAProxy sending
  # the PROXY header, --proxy-protocol, refused peers shed (30 faults per 10 s, then 3 in 4
  # closed: the defaults): most attempts end right after the header, before TLS. A row per
  # attempt.
  if "$cxx_bin" --help 2>&1 | grep -q -- --max-refusals-per-peer; then
    log "refused calls: $seconds s, the same document from one address, through HAProxy to --proxy-protocol"
    "$cxx_bin" --listen "127.0.0.1:$shed_port" --proxy-protocol --proxy-protocol-from 127.0.0.1/32 \
      --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
      --components-dir "$work/etc/components" --attestation-roots "$work/pki/roots.pem" \
      --log-level error >"$work/cxx-shed.log" 2>&1 &
    shed_pid=$!
    pids+=($!)
    stack_start_haproxy "$shed_proxy" "$shed_port" "$api_port" "$work/haproxy-shed.log" send-proxy
    for p in "$shed_port" "$shed_proxy"; do stack_wait_port "$p" "$work"; done
    f=$out/refused-shed.txt
    refused_load "$shed_pid" "127.0.0.1:$shed_proxy" "$work/refused-repeat.txt" "$f"
    ok=$(get ok) bad=$(get failed) el=$(get elapsed_s)
    ((ok > 0 && bad > ok)) || die "shed: $ok answered, $bad closed: the peer was not shed (see $f)"
    awk -v l="$cxx_label --proxy-protocol" -v ok="$ok" -v bad="$bad" -v el="$el" -v cpu="$cpu_s" \
        'BEGIN { printf "%s\tshed\t%d\t%d\t%.1f\t%.2f\t%.3f\n", l, ok, bad, (ok + bad) / el, cpu, 1000 * cpu / (ok + bad) }' \
      >>"$refused_tsv"
    tail -1 "$refused_tsv" | awk -F'\t' '{ printf "shed: %d answered, %d closed before TLS, %s attempts/s, %.3f ms CPU per attempt\n", $3, $4, $5, $7 }' >&2
  fi
fi

declare -A short_of=([$cxx_label]=cxx [$go_label]=go)
if ((profile > 0)); then
  if command -v perf >/dev/null; then
    for label in "${labels[@]}"; do
      log "profile: perf record of $label for $profile s of the same load (not recorded)"
      data=$out/perf-${short_of[$label]}.data
      # Call graphs: DWARF unwinding for the C++ server (Debian's libcrypto, libssl and libgrpc
      # have no frame pointers), frame pointers for Go's (which keeps them; perf's DWARF
      # unwinding loses Go's stacks). The load starts after run_boot's 1 s pause; the profile
      # covers the load only.
      unwind=dwarf,8192
      [[ $label == "$go_label" ]] && unwind=fp
      (sleep 1.2 && exec perf record -F 499 --call-graph "$unwind" -o "$data" \
        -p "${pid_of[$label]}" -- sleep "$profile") >"$out/perf-record-${short_of[$label]}.log" 2>&1 &
      perf_pid=$!
      run_boot "$label" profile "$profile"
      wait "$perf_pid" || echo "perf record failed (see $out/perf-record-${short_of[$label]}.log)" >&2
      perf report -i "$data" --no-children --sort dso --stdio -g none \
        >"$out/perf-${short_of[$label]}-dso.txt" 2>/dev/null || true
      perf report -i "$data" --no-children --sort dso,sym --stdio -g none \
        >"$out/perf-${short_of[$label]}-sym.txt" 2>/dev/null || true
      # Inclusive shares of the entry points that say which work the CPU went to.
      perf report -i "$data" --children --sort sym --stdio -g none \
        >"$out/perf-${short_of[$label]}-children.txt" 2>/dev/null || true
    done
  else
    echo "perf not installed: no profile" >&2
  fi
fi

# ---------------------------------------------------------------------------------------
source bench/lib/tsv.sh  # col, median
summary=$out/summary.md
{
  echo "# node_boot_bench $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'),"\
       "kernel $(uname -r); loadavg before $load_before, after $load_after"
  dirty=$(git status --porcelain -- src cmd CMakeLists.txt bench/grpcgo-server | wc -l)
  echo "tree: $(git rev-parse --short HEAD)$( ((dirty)) && echo " + $dirty uncommitted files"); C++ server: $cxx_origin"
  [[ -z ${BENCH_CXX_ENV:-} ]] || echo "C++ server environment: $BENCH_CXX_ENV"
  ((${#cxx_extra[@]} == 0)) || echo "C++ server flags added by the bench: ${cxx_extra[*]}"
  echo "load generator: $( [[ $client == cxx ]] && echo 'bench/boot_client.cc (the node'"'"'s own client, hotfix-agent'"'"'s fetch path)' || echo 'benchclient boot (Go)')"
  echo "load: one TCP+TLS connection per call, a distinct attested document per call ($signer signer," \
       "$token_bytes-byte token), $parallel connecting workers, $rounds rounds x ${seconds} s per server," \
       "alternating; $( ((via_proxy)) && echo 'each server behind HAProxy' || echo 'direct (no proxy)')"
  declare -A med_cpc med_ms med_cps
  for label in "${labels[@]}"; do
    med_cpc[$label]=$(col "$label" 9 | median)
    med_ms[$label]=$(col "$label" 8 | median)
    med_cps[$label]=$(col "$label" 6 | median)
  done
  ratio=$(awk -v a="${med_cpc[$cxx_label]}" -v b="${med_cpc[$go_label]}" 'BEGIN { printf "%.2f", a / b }')
  verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 1.5) ? "MET" : "MISSED" }')
  echo
  if ((failures)); then
    echo "**RUN FAILED: $failures failed calls or checks (see bench/out/node-boot/boot-*.txt); figures below are not valid**"
    echo
  fi
  echo "**goal (calls per server CPU-second, live-patching-service / grpc-go >= 1.50): $verdict, ratio $ratio**"
  echo
  echo "## per round"
  echo
  echo "| round | server | OK calls | failed | calls/s | server CPU s | ms CPU per call | calls per CPU-s | client CPU s | machine idle % | p50 ms | p99 ms |$( ((via_proxy)) && echo ' HAProxy CPU s |')"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|$( ((via_proxy)) && echo '---|')"
  tail -n +2 "$samples" | awk -F'\t' -v px="$via_proxy" '{
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", $1, $2, $3, $4, $6, $7, $8, $9, $10, $11, $12, $13
      if (px) printf " %s |", $14
      printf "\n" }'
  echo
  echo "## medians over rounds"
  echo
  echo "| server | calls per server CPU-s | ms CPU per call | calls/s | client CPU per call (ms) | distinct documents / OK calls (whole run) |"
  echo "|---|---|---|---|---|---|"
  for label in "${labels[@]}"; do
    cli=$(awk -F'\t' -v s="$label" 'NR > 1 && $2 == s { c += $10; n += $3 } END { printf "%.3f", 1000 * c / n }' "$samples")
    echo "| $label | ${med_cpc[$label]} | ${med_ms[$label]} | ${med_cps[$label]} | $cli | ${distinct_of[$label]} |"
  done
  awk -v a="${med_cpc[$cxx_label]}" -v b="${med_cpc[$go_label]}" -v c="${med_ms[$cxx_label]}" \
      -v d="${med_ms[$go_label]}" -v e="${med_cps[$cxx_label]}" -v f="${med_cps[$go_label]}" \
    'BEGIN { printf "| **ratio C++ / Go** | **%.2f** | %.2f | %.2f | | |\n", a / b, c / d, e / f }'
  if ((refused)); then
    echo
    echo "## refused calls (a new connection each, a document from an untrusted signer)"
    echo
    echo "| server | document | refused calls | calls/s | ms CPU per refused call | share of a good call's |"
    echo "|---|---|---|---|---|---|"
    tail -n +2 "$refused_tsv" | while IFS=$'\t' read -r l k ok bad cps cpu ms; do
      [[ $k == shed ]] && continue
      awk -v l="$l" -v k="$k" -v ok="$ok" -v cps="$cps" -v ms="$ms" -v good="${med_ms[$l]}" \
        'BEGIN { printf "| %s | %s | %d | %s | %.3f | %.0f %% |\n", l, (k == "repeat") ? "the same one" : "a distinct one", ok, cps, ms, 100 * ms / good }'
    done
    if grep -q $'\tshed\t' "$refused_tsv"; then
      echo
      echo "## a repeating refused peer, shed before TLS (HAProxy send-proxy-v2, --proxy-protocol)"
      echo
      echo "| server | attempts | answered UNAUTHENTICATED | closed after the PROXY header | attempts/s | ms CPU per attempt | share of a good call's |"
      echo "|---|---|---|---|---|---|---|"
      awk -F'\t' -v good="${med_ms[$cxx_label]}" '$2 == "shed" {
          printf "| %s | %d | %d | %d | %s | %.3f | %.0f %% |\n", $1, $3 + $4, $3, $4, $5, $7, 100 * $7 / good }' \
        "$refused_tsv"
    fi
  fi
  echo
  echo "## memory (VmRSS, MB)"
  echo
  echo "| server | idle | with $idle_conns idle TLS connections | per connection (kB) | after the rounds |"
  echo "|---|---|---|---|---|"
  for label in "${labels[@]}"; do
    awk -v l="$label" -v a="${rss_idle[$label]}" -v b="${rss_conns[$label]}" -v n="$idle_conns" \
        -v c="${rss_after[$label]}" \
      'BEGIN { printf "| %s | %.1f | %.1f | %.1f | %.1f |\n", l, a / 1024, b / 1024, (b - a) / n, c / 1024 }'
  done
  awk -v a="${rss_conns[$cxx_label]}" -v b="${rss_conns[$go_label]}" -v c="${rss_idle[$cxx_label]}" \
      -v d="${rss_idle[$go_label]}" -v n="$idle_conns" \
    'BEGIN { printf "| **ratio C++ / Go** | | %.2f | %.2f | |\n", a / b, (a - c) / (b - d) }'
  # (libssl's and libgrpc's handshake code has no exported symbols to attribute to; EC_POINT_mul
  # is every P-256 scalar multiplication: the handshake's ECDH and ECDSA signature and the
  # documents' ECDSA verifications.)
  declare -A entries=(
    [$cxx_label]="hotfix::service::(anonymous namespace)::AttestedDocumentAuthenticator::Authenticate
d2i_PKCS7
OSSL_DECODER_CTX_new_for_pkey
i2d_PKCS7
PKCS7_verify
X509_verify_cert
EC_POINT_mul
ECDH_compute_key
EVP_DigestSignFinal
grpc_core::HuffDecoder<
grpc_chttp2_transport::grpc_chttp2_transport
hotfix::Logger::WriteFormatted
__libc_sendmsg"
    [$go_label]="main.(*authenticator).verify
github.com/fullsailor/pkcs7.Parse
github.com/fullsailor/pkcs7.(*PKCS7).VerifyWithChain
crypto/x509.(*Certificate).Verify
crypto/tls.(*Conn).serverHandshake
crypto/ecdsa.Sign
crypto/ecdsa.Verify
crypto/ecdh
crypto/elliptic
golang.org/x/net/http2/hpack.(*Decoder).Write
google.golang.org/grpc/internal/transport.newHTTP2Server
main.(*server).logCall
runtime.mallocgc
runtime.gcBgMarkWorker
syscall.Syscall")
  for label in "${labels[@]}"; do
    f=$out/perf-${short_of[$label]}
    [[ -s $f-dso.txt ]] || continue
    echo
    echo "## where $label's CPU goes (perf, $profile s of the same load)"
    echo
    echo "| by binary or library (self) | share |"
    echo "|---|---|"
    awk '!/^#/ && NF >= 2 && $1 ~ /%$/ { printf "| %s | %s |\n", $2, $1 }' "$f-dso.txt" | head -8
    echo
    echo "| entry point (inclusive: with what it calls) | share |"
    echo "|---|---|"
    while IFS= read -r fn; do
      awk -v fn="$fn" '!/^#/ && $1 ~ /%$/ {
          line = $0; sub(/^ *[0-9.]+% +[0-9.]+% +\[[^]]*\] +/, "", line)
          if (index(line, fn) == 1) { printf "| `%s` | %s |\n", line, $1; exit } }' "$f-children.txt"
    done <<<"${entries[$label]}"
  done
} >"$summary"
cat "$summary"
echo >&2
echo "raw samples: $samples; load generator output: $out/boot-*.txt; logs: $work/; summary: $summary" >&2
((failures == 0)) || exit 1
