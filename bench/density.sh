#!/usr/bin/env bash
# Density (issue 31): how many idle TLS connections a replica holds under a memory limit, and
# whether a node is still answered while they are held. live-patching-service (Release,
# identity ON) runs with --memory-limit DENSITY_LIMIT; connhold (bench/connhold.c) opens
# DENSITY_CONNS idle TLS+HTTP/2 connections straight to it (handshake with ALPN, preface,
# SETTINGS, no call). connhold opens a connection again when the service closes it (the 10 s
# first-request timeout does, docs/SERVICE.md "Limits"), so the count holds.
# Asserts, with the connections held:
#   - the service's cap (lp_max_connections) admits them all, and none was shed
#     (lp_transport_events_total{event="shed_max_connections"} and "memory_over_share" stay 0);
#   - `ss` sees them established at the service;
#   - VmRSS is below the limit, and so is the cgroup-style total the cap budgets for;
#   - a node's call (curl, HTTP/2, a real attested document) is answered OK.
# Prints a summary (also bench/out/density/summary.md).
#
#   bench/density.sh                                  # 2,000 at 128Mi, the goal
#   DENSITY_CONNS=3000 DENSITY_LIMIT=192Mi bench/density.sh
#
# Env: DENSITY_CONNS (2000), DENSITY_LIMIT (128Mi), DENSITY_PORT_BASE (18840, uses
# BASE..BASE+2), BUILD_ROOT (build), BENCH_NO_BUILD=1, DENSITY_BIN_DIR=DIR (live-patching-service
# and imds-standin already built there: scripts/test.sh gives build/release/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

n=${DENSITY_CONNS:-2000} limit=${DENSITY_LIMIT:-128Mi}
base=${DENSITY_PORT_BASE:-18840}
svc_port=$base imds_port=$((base + 1)) metrics_port=$((base + 2))
build_root=${BUILD_ROOT:-build}
fqdn='density-aks-dns-12345678.hcp.eastus.azmk8s.io'
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

out=$root/bench/out/density
work=$out/work
rm -rf "$out" && mkdir -p "$work/etc/components"

source bench/lib/stack.sh
die() {
  echo "density: FAIL: $*" >&2
  [[ -f $work/service.log ]] && tail -5 "$work/service.log" >&2
  exit 1
}
stack_ports_free "$base" $((base + 2)) DENSITY_PORT_BASE
stack_raise_fds $((2 * n + 1000))

stack_release_bin "${DENSITY_BIN_DIR:-}" "$build_root"
connhold=$out/connhold
cc -O2 -Wall -Wextra -Werror -o "$connhold" bench/connhold.c -lssl -lcrypto ||
  die "connhold did not build"

source scripts/lib/certs.sh
make_cluster_pki "$work/etc" density-cluster-ca "$fqdn" "$fqdn" >/dev/null
printf '{"hotfixes":{"202604.01":"202604.01.7"}}' >"$work/etc/components/aksNodeController.json"
stack_start_imds "$bin" "$imds_port" "$work/etc/imds-root.pem" "$work/imds.log"

# The limit as a pod's: a memory cgroup of its own (v1's memory.limit_in_bytes, or v2's
# memory.max), which the kernel enforces and the service reads as its default limit, when this
# machine lets us make one (root, a writable hierarchy); else --memory-limit alone, and only
# VmRSS is measured against it.
limit_bytes=$(python3 -c '
import sys
s = sys.argv[1]
for suffix, factor in (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)):
    if s.endswith(suffix):
        print(int(s[: -len(suffix)]) * factor); break
else:
    print(int(s))' "$limit")
cg='' cg_usage='' cg_peak=''
if [[ -w /sys/fs/cgroup/memory && -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]]; then
  cg=/sys/fs/cgroup/memory/lp-density-$$
  mkdir "$cg" && echo "$limit_bytes" >"$cg/memory.limit_in_bytes" || cg=''
  cg_usage=memory.usage_in_bytes cg_peak=memory.max_usage_in_bytes
elif [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] &&
  grep -qw memory /sys/fs/cgroup/cgroup.subtree_control; then
  cg=/sys/fs/cgroup/lp-density-$$
  mkdir "$cg" && echo "$limit_bytes" >"$cg/memory.max" || cg=''
  cg_usage=memory.current cg_peak=memory.peak
fi
limit_args=(--memory-limit "$limit") limit_from=flag
if [[ -n $cg ]]; then
  limit_args=() limit_from=cgroup
  cg_cleanup() { stack_cleanup; rmdir "$cg" 2>/dev/null || true; }
  trap cg_cleanup EXIT
fi

# Every connection comes from 127.0.0.1: the per-peer cap must not be what limits them.
(
  [[ -z $cg ]] || echo "$BASHPID" >"$cg/cgroup.procs"
  exec "$bin/live-patching-service" --listen "127.0.0.1:$svc_port" \
    --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
    --components-dir "$work/etc/components" --attestation-roots "$work/etc/imds-root.pem" \
    "${limit_args[@]}" --max-connections-per-peer 100000 \
    --metrics-listen "127.0.0.1:$metrics_port" >"$work/service.log" 2>&1
) &
svc_pid=$!
pids+=($!)
for p in "$svc_port" "$metrics_port"; do stack_wait_port "$p" "$work"; done
stack_fetch_token "$imds_port" "$work"
printf '\x00\x00\x00\x00\x13\x0a\x11aksNodeController' >"$work/request.bin"

metric_sum() { # NAME [REGEX on the whole line]
  curl -sf "http://127.0.0.1:$metrics_port/metrics" |
    awk -v n="$1" -v re="${2:-.}" 'index($0, n) == 1 && $0 ~ re { s += $NF } END { printf "%.0f\n", s }'
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$svc_pid/status"; }
grpc_call() { stack_grpc_call "$fqdn" "$svc_port" "$work"; }

read -r status body < <(grpc_call)
[[ $status == 0 && $body == *'"202604.01.7"'* ]] || die "first call: grpc-status $status, $body"
max_conns=$(metric_sum lp_max_connections)
[[ $(metric_sum lp_memory_limit_bytes) == "$limit_bytes" ]] ||
  die "the service says its limit is $(metric_sum lp_memory_limit_bytes) bytes, not $limit_bytes"
grep -q "\"memory_limit_from\":\"$limit_from\"" "$work/service.log" ||
  die "the service did not take its limit from the $limit_from"
rss_idle=$(rss_kb)
cg_read() { [[ -n $cg ]] && cat "$cg/$1" || echo 0; }
cg_idle=$(cg_read "$cg_usage")
log "service: limit $limit from the $limit_from ($limit_bytes bytes), cap $max_conns connections, VmRSS $((rss_idle / 1024)) MiB idle"
((max_conns >= n)) || die "the cap admits $max_conns connections under $limit, fewer than $n"

log "holding $n idle TLS connections"
mkfifo "$work/hold.fifo"
"$connhold" 127.0.0.1 "$svc_port" "$fqdn" --idle "$n" --report-s 5 \
  <"$work/hold.fifo" >"$work/connhold.out" 2>&1 &
hold_pid=$!
pids+=($!)
exec {hold_fd}>"$work/hold.fifo"
for _ in $(seq 1200); do
  grep -q '^open' "$work/connhold.out" && break
  kill -0 "$hold_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "^open $n\$" "$work/connhold.out" || { cat "$work/connhold.out" >&2; die "connhold could not open $n connections"; }

# Measured while held: connhold has them all open, and the service's first-request timeout
# (10 s after each one's TLS) has not yet closed the first of them.
established=$(ss -Htn state established "( sport = :$svc_port )" | wc -l)
rss_held=$(rss_kb)
cg_held=$(cg_read "$cg_usage")
read -r status body < <(grpc_call)
shed=$(metric_sum lp_transport_events_total 'event="(shed_max_connections|memory_over_share)"')
pool_used=$(metric_sum lp_connection_memory_bytes)
log "held: $established established, VmRSS $((rss_held / 1024)) MiB, a node's call: grpc-status $status"
exec {hold_fd}>&-
wait "$hold_pid" 2>/dev/null || true
cg_peak_bytes=$(cg_read "$cg_peak")
# Times the cgroup reached its limit (v1's failcnt, v2's "max" events): the kernel then
# reclaimed or killed, which the cap is there to prevent.
cg_hits=0
if [[ -n $cg ]]; then
  if [[ -f $cg/memory.failcnt ]]; then cg_hits=$(<"$cg/memory.failcnt"); else
    cg_hits=$(awk '$1 == "max" { print $2 }' "$cg/memory.events"); fi
fi
kill -0 "$svc_pid" 2>/dev/null || die "the service is gone (the kernel's OOM killer?)"

per_conn=$(((rss_held - rss_idle) * 1024 / n))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
{
  echo "# density: $n idle TLS connections under a $limit limit (from the $limit_from)"
  echo
  echo "| cap | held (ss) | shed | VmRSS idle | VmRSS held | per connection (RSS) | cgroup idle | cgroup held | cgroup peak | limit hit | pool in use | node call |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  echo "| $max_conns | $established | $shed | $(mib $((rss_idle * 1024))) | $(mib $((rss_held * 1024))) | $per_conn B | $(mib "$cg_idle") | $(mib "$cg_held") | $(mib "$cg_peak_bytes") | $cg_hits | $(mib "$pool_used") | grpc-status $status |"
} | tee "$out/summary.md"

((established >= n)) || die "$established connections established, want $n"
((shed == 0)) || die "$shed connections shed (shed_max_connections)"
((rss_held * 1024 < limit_bytes)) || die "VmRSS $((rss_held * 1024)) bytes is not below the limit $limit_bytes"
[[ $status == 0 && $body == *'"202604.01.7"'* ]] || die "a node's call while held: grpc-status $status, $body"
((cg_hits == 0)) || die "the cgroup reached its limit $cg_hits times"
echo "density: PASS"
