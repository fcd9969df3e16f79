#!/usr/bin/env bash
# An idle replica's CPU (issue 19, "the service never sleeps"): live-patching-service as the
# Deployment runs it (TLS port, plaintext health port, metrics port, attested-document roots;
# no --prometheus-url, so no evaluation thread wakes) and, as the reference in the same run,
# bench/grpcgo-server (grpc-go, the reference's gRPC) with the same files. No connection is
# made to either while measured. Goal: an idle replica under 0.1 % of a core.
#
#   bench/idle_bench.sh [--seconds S]      S: the measured window (default 30)
#   Ports (env): BENCH_IDLE_PORT_BASE=18790 (uses BASE..BASE+3)
#   BUILD_ROOT=build, BENCH_JOBS=1, BENCH_NO_BUILD=1, BENCH_CXX_BIN=/path: as
#   bench/rollout_bench.sh (stack_service_binary in bench/lib/stack.sh).
#
# Per server: CPU is the sum over its threads of /proc/PID/task/TID/schedstat's first field
# (nanoseconds on a CPU; utime+stime's 10 ms ticks are too coarse for an idle process), and
# wake-ups the sum of their voluntary and involuntary context switches, both over the window.
# Output: bench/out/idle/summary.md (and on stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=30
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds S]" >&2; exit 2 ;;
  esac
done
die() { echo "idle_bench: $*" >&2; exit 1; }
source bench/lib/stack.sh
build_root=${BUILD_ROOT:-build}
base=${BENCH_IDLE_PORT_BASE:-18790}
out=$root/bench/out/idle
work=$out/work
rm -rf "$out"
mkdir -p "$work/etc/components"
stack_ports_free "$base" $((base + 3)) BENCH_IDLE_PORT_BASE

stack_service_binary "$build_root" "$out"
stack_bench_tools "$build_root"
source scripts/lib/certs.sh
# The service's certificate is for the apiserver FQDN, the name nodes verify (AgentBaker #9351).
make_cluster_pki "$work/etc" bench-cluster-ca bench-aks.hcp.eastus.azmk8s.io \
  bench-aks.hcp.eastus.azmk8s.io
printf '{"hotfixes":{"202604.01":"202604.01.3"}}' >"$work/etc/components/aksNodeController.json"
stack_imds_pki "$work/pki" ec

log "servers: live-patching-service ($origin) and grpcgo-server, idle for ${seconds}s"
"$bin" --listen "127.0.0.1:$base" --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
  --components-dir "$work/etc/components" --attestation-roots "$work/pki/roots.pem" \
  --health-listen "127.0.0.1:$((base + 1))" --metrics-listen "127.0.0.1:$((base + 2))" \
  >"$work/cxx.log" 2>&1 &
cxx_pid=$!
pids+=($!)
"$goserver" --listen "127.0.0.1:$((base + 3))" --tls-cert "$work/etc/lps.pem" \
  --tls-key "$work/etc/lps.key" --components-dir "$work/etc/components" \
  --attestation-roots "$work/pki/roots.pem" >"$work/go.log" 2>&1 &
go_pid=$!
pids+=($!)
for p in "$base" $((base + 1)) $((base + 2)) $((base + 3)); do stack_wait_port "$p" "$work"; done
sleep 2  # start-up done (the port checks' connections closed and timed out)

# cpu_ns PID, switches PID: summed over the process's threads.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^(non)?voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'
}
declare -A cpu0 sw0
for p in "$cxx_pid" "$go_pid"; do cpu0[$p]=$(cpu_ns "$p") sw0[$p]=$(switches "$p"); done
t0=$(date +%s%N)
sleep "$seconds"
t1=$(date +%s%N)
wall_ns=$((t1 - t0))
row() {  # LABEL PID -> "| label | % of a core | wake-ups/s | threads |", and sets pct_LABEL
  local cpu sw threads
  cpu=$(($(cpu_ns "$2") - cpu0[$2]))
  sw=$(($(switches "$2") - sw0[$2]))
  threads=$(ls /proc/"$2"/task | wc -l)
  awk -v l="$1" -v c="$cpu" -v w="$wall_ns" -v s="$sw" -v t="$threads" \
    'BEGIN { printf "| %s | %.4f %% | %.1f | %d |\n", l, 100 * c / w, s / (w / 1e9), t }'
}
kill -0 "$cxx_pid" && kill -0 "$go_pid" || die "a server exited (see $work)"
{
  echo "## Idle CPU, ${seconds} s, no connection ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  echo "| server | CPU | wake-ups/s | threads |"
  echo "|---|---|---|---|"
  row "live-patching-service" "$cxx_pid"
  row "grpc-go (reference)" "$go_pid"
  echo
  echo "live-patching-service: $origin. Command: bench/idle_bench.sh --seconds $seconds"
} | tee "$out/summary.md"
