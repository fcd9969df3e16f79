#!/usr/bin/env bash
# The local end-to-end demo: live-patching-service, the ALPN-routing proxy in front of an
# "apiserver", an IMDS stand-in whose signer the service trusts, and check-hotfix staging the
# pointer, all on loopback; then download-hotfix's dry run on that pointer, a staged rollout,
# and a canary that halts itself when the nodes that install it report failures (a real
# Prometheus scraping the service is the evidence).
#   scripts/demo.sh   (ports: DEMO_PROXY_PORT=8443 DEMO_LPS_PORT=50051 DEMO_METRICS_PORT=19090
#                      DEMO_APISERVER_PORT=16443 DEMO_IMDS_PORT=18080 DEMO_FOREIGN_IMDS_PORT=18081
#                      DEMO_OTHER_IMDS_PORT=18082 DEMO_PROMETHEUS_PORT=19091)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

scripts/install-deps.sh
build=${BUILD_DIR:-build/release}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOTFIX_AGENT_VERSION=202604.01.0 \
  >/dev/null
ninja -C "$build" hotfix-agent live-patching-service imds-standin >/dev/null
bin=$root/$build/bin

proxy_port=${DEMO_PROXY_PORT:-8443}
lps_port=${DEMO_LPS_PORT:-50051}
metrics_port=${DEMO_METRICS_PORT:-19090}
api_port=${DEMO_APISERVER_PORT:-16443}
imds_port=${DEMO_IMDS_PORT:-18080}
foreign_imds_port=${DEMO_FOREIGN_IMDS_PORT:-18081}
other_imds_port=${DEMO_OTHER_IMDS_PORT:-18082}
prometheus_port=${DEMO_PROMETHEUS_PORT:-19091}
fqdn=demo-aks-dns-12345678.hcp.eastus.azmk8s.io
lps_name=aks-security-patch.data.mcr.microsoft.com

work=$root/.demo
rm -rf "$work" && mkdir -p "$work/etc/components" "$work/events" "$work/opt"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
wait_port() {  # by the listen table, so that probes do not show up as connections
  for _ in $(seq 100); do [[ -n "$(ss -Hltn "sport = :$1")" ]] && return 0; sleep 0.1; done
  echo "nothing listens on $1" >&2; exit 1
}

# A stale process on one of these ports would answer instead of the demo's (and some servers
# share a port silently with SO_REUSEPORT): refuse to start rather than demo the wrong thing.
for p in "$proxy_port" "$lps_port" "$metrics_port" "$api_port" "$imds_port" "$foreign_imds_port" \
  "$other_imds_port" "$prometheus_port"; do
  if [[ -n "$(ss -Hltn "sport = :$p")" ]]; then
    echo "port $p is already in use; pick others with DEMO_*_PORT (see the top of $0)" >&2
    exit 1
  fi
done

step "cluster CA and certificates (OpenSSL)"
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" demo-cluster-ca "$lps_name" "$fqdn"
echo "CA: $work/etc/ca.pem; service cert for $lps_name; apiserver cert for $fqdn"

step "the node's bootstrap file (AKSNodeConfig) names the apiserver and the cluster CA"
cat >"$work/opt/aks-node-controller-config.json" <<JSON
{
  "version": "v1",
  "api_server_config": {"api_server_name": "$fqdn"},
  "kubernetes_ca_cert": "$(base64 -w0 "$work/etc/ca.pem")"
}
JSON
sed 's/"kubernetes_ca_cert": "\(.\{24\}\).*"/"kubernetes_ca_cert": "\1..."/' \
  "$work/opt/aks-node-controller-config.json"

step "IMDS stand-in: signs attested documents under its own root (the service will trust it)"
"$bin/imds-standin" --listen "127.0.0.1:$imds_port" --write-signer-ca "$work/etc/imds-root.pem" \
  >"$work/imds.log" 2>&1 &
pids+=($!)
wait_port "$imds_port"
for _ in $(seq 100); do [[ -s "$work/etc/imds-root.pem" ]] && break; sleep 0.1; done  # written after bind
echo "signer root: $work/etc/imds-root.pem ($(openssl x509 -in "$work/etc/imds-root.pem" -noout -subject))"
# A second node's IMDS (another vmId, its own signer root), for the rollout at the end.
other_vm=7f3e0d52-1b9c-4c1e-9a57-0c2f4b8e6d10
"$bin/imds-standin" --listen "127.0.0.1:$other_imds_port" --vm-id "$other_vm" \
  --write-signer-ca "$work/etc/imds-root-b.pem" >"$work/imds-b.log" 2>&1 &
pids+=($!)
wait_port "$other_imds_port"
for _ in $(seq 100); do [[ -s "$work/etc/imds-root-b.pem" ]] && break; sleep 0.1; done
cat "$work/etc/imds-root.pem" "$work/etc/imds-root-b.pem" >"$work/etc/imds-roots.pem"

step "live-patching-service serving the component store $work/etc/components"
printf '{"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}}' \
  >"$work/etc/components/aksNodeController.json"
echo "aksNodeController.json: $(cat "$work/etc/components/aksNodeController.json")"
"$bin/live-patching-service" --listen "127.0.0.1:$lps_port" --proxy-protocol \
  --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
  --components-dir "$work/etc/components" --attestation-roots "$work/etc/imds-roots.pem" \
  --metrics-listen "127.0.0.1:$metrics_port" \
  --prometheus-url "http://127.0.0.1:$prometheus_port" --auto-halt-interval 1s \
  >"$work/lps.log" 2>&1 &
pids+=($!)

step "Prometheus (Debian's) scraping the service every second: the evidence of self-halting rollouts"
mkdir -p "$work/prometheus"
cat >"$work/prometheus/prometheus.yml" <<YAML
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: live-patching
    static_configs: [{targets: ['127.0.0.1:$metrics_port']}]
YAML
prometheus --config.file="$work/prometheus/prometheus.yml" \
  --storage.tsdb.path="$work/prometheus/data" --web.listen-address="127.0.0.1:$prometheus_port" \
  --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)

step "apiserver stand-in (openssl s_server)"
openssl s_server -quiet -accept "$api_port" -cert "$work/etc/apiserver.pem" \
  -key "$work/etc/apiserver.key" -alpn h2,http/1.1 -www >"$work/apiserver.log" 2>&1 &
pids+=($!)

step "kube-api-proxy stand-in: HAProxy routing on ALPN (deploy/haproxy/haproxy.cfg)"
LP_FRONTEND_BIND="127.0.0.1:$proxy_port" LP_SERVICE_ADDR="127.0.0.1:$lps_port" \
  LP_APISERVER_ADDR="127.0.0.1:$api_port" \
  haproxy -db -f deploy/haproxy/haproxy.cfg >"$work/haproxy.log" 2>&1 &
pids+=($!)
for p in "$lps_port" "$api_port" "$proxy_port" "$prometheus_port"; do wait_port "$p"; done
echo "proxy 127.0.0.1:$proxy_port -> ALPN aks-live-patching: 127.0.0.1:$lps_port, else: 127.0.0.1:$api_port"

step "hotfix-agent check-hotfix (SNI $fqdn, ALPN aks-live-patching,h2, cert pinned to $lps_name)"
pointer=$work/opt/aks-node-controller-hotfix.json
printf '{"version":"202604.01.2","scripts_version":"202604.01.1"}' >"$pointer"
echo "pointer before: $(cat "$pointer")"
args=(check-hotfix --node-config "$work/opt/aks-node-controller-config.json"
      --nbc-cmd "$work/opt/aks-node-controller-nbc-cmd.sh" --hotfix-pointer "$pointer"
      --imds-url "http://127.0.0.1:$imds_port/metadata/attested/document?api-version=2025-04-07"
      --connect-to "127.0.0.1:$proxy_port" --events-dir "$work/events"
      --log-file "$work/aks-node-controller.log" --current-version 202604.01.0)
start=$(date +%s%N)
"$bin/hotfix-agent" "${args[@]}" 2>"$work/stderr.log"
rc=$?
echo "exit code $rc in $(( ($(date +%s%N) - start) / 1000000 )) ms"

step "the staged pointer (for download-hotfix)"
cat "$pointer"; echo
step "hotfix-agent download-hotfix --dry-run: what this Ubuntu node (202604.01.0) would install"
mkdir -p "$work/etc/apt/sources.list.d"
printf 'NAME="Ubuntu"\nID=ubuntu\n' >"$work/etc/os-release"
echo "deb https://packages.microsoft.com/ubuntu/22.04/prod jammy main" \
  >"$work/etc/apt/sources.list.d/microsoft-prod.list"
"$bin/hotfix-agent" download-hotfix --dry-run --hotfix-pointer "$pointer" \
  --current-version 202604.01.0 --os-release "$work/etc/os-release" \
  --apt-sources-dir "$work/etc/apt/sources.list.d" \
  --vhd-binary "$work/opt/aks-node-controller" \
  --hotfix-binary "$work/opt/aks-node-controller-hotfix" \
  --node-custom-data "$work/opt/nodecustomdata.yml" 2>/dev/null
step "the guest-agent event"
cat "$work"/events/*.json; echo
step "the agent's log lines"
cat "$work/aks-node-controller.log"
step "the service's log: start-up, then one access-log line per call (identity, never the token)"
cat "$work/lps.log"
step "the service's metrics (Prometheus, 127.0.0.1:$metrics_port/metrics)"
metrics() {  # bash's /dev/tcp: no HTTP client needed
  exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
  printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  cat <&3
  exec 3<&-
}
metrics | grep -E '^lp_(requests_total|identity_failures_total|store_generation)' | grep -v ' 0$' || true

step "a node whose attested document no trusted root signed: UNAUTHENTICATED -> noHotfixAvailable"
"$bin/imds-standin" --listen "127.0.0.1:$foreign_imds_port" >"$work/imds-foreign.log" 2>&1 &
pids+=($!)
wait_port "$foreign_imds_port"
foreign_args=("${args[@]/127.0.0.1:$imds_port/127.0.0.1:$foreign_imds_port}")
"$bin/hotfix-agent" "${foreign_args[@]}" --dry-run 2>/dev/null
tail -n 1 "$work/lps.log"
step "a client offering only h2 (kubectl, say) reaches the apiserver, not the service"
openssl s_client -connect "127.0.0.1:$proxy_port" -servername "$fqdn" -alpn h2 \
  -CAfile "$work/etc/ca.pem" </dev/null 2>/dev/null | grep -E "^subject=|ALPN protocol" || true

step "a staged rollout: 202604.01.4 for one node of the cluster (match.vm_ids), the rest keeps 202604.01.3"
node_vm=02aab8a4-74ef-476e-8182-f6d2ba4166a6  # the first IMDS stand-in's node
mkdir -p "$work/etc/components-next"
cat >"$work/etc/components-next/aksNodeController.json" <<JSON
{
  "hotfixes": {"202604.01": "202604.01.3", "202605.30": "202605.30.1"},
  "rollouts": [
    {
      "name": "anc-202604.01.4-canary",
      "hotfixes": {"202604.01": "202604.01.4"},
      "match": {"vm_ids": ["$node_vm"], "clusters": ["*.hcp.eastus.azmk8s.io"]},
      "steps": [{"at": "2026-01-01T00:00:00Z", "percent": 100}]
    }
  ]
}
JSON
# What a config repository's CI runs before the ConfigMap changes:
"$bin/live-patching-service" validate --components-dir "$work/etc/components-next"
cp "$work/etc/components-next/aksNodeController.json" "$work/etc/components/.next.tmp"
mv "$work/etc/components/.next.tmp" "$work/etc/components/aksNodeController.json"
sleep 1  # the store reloads within a second (inotify, 200 ms debounce)
for node in "$imds_port:$node_vm" "$other_imds_port:$other_vm"; do
  port=${node%%:*}
  node_args=("${args[@]/127.0.0.1:$imds_port/127.0.0.1:$port}")
  printf '{"version":"202604.01.2","scripts_version":"202604.01.1"}' >"$pointer"
  "$bin/hotfix-agent" "${node_args[@]}" 2>/dev/null
  echo "node ${node#*:}: $(tr -d '\n' <"$pointer")"
done
step "live-patching-service plan: why each node gets what it gets"
for vm in "$node_vm" "$other_vm"; do
  "$bin/live-patching-service" plan --components-dir "$work/etc/components" \
    --component aksNodeController --vm-id "$vm" \
    --subscription 8d10da13-8125-4ba9-a717-bf7490507b3d --cluster "$fqdn"
done
step "the rollouts' status (127.0.0.1:$metrics_port/rollouts)"
exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
printf 'GET /rollouts HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
sed '1,/^\r$/d' <&3
exec 3<&-

step "a canary that halts itself: 202604.01.5 for both nodes, halting past 40% failures of 2 reports"
cat >"$work/etc/components/.next.tmp" <<JSON
{
  "hotfixes": {"202604.01": "202604.01.3", "202605.30": "202605.30.1"},
  "rollouts": [
    {
      "name": "anc-202604.01.5-canary",
      "hotfixes": {"202604.01": "202604.01.5"},
      "steps": [{"at": "2026-01-01T00:00:00Z", "percent": 100}],
      "auto_halt": {"max_failure_percent": 40, "min_reports": 2}
    }
  ]
}
JSON
mv "$work/etc/components/.next.tmp" "$work/etc/components/aksNodeController.json"
sleep 2  # reloaded, and judged once (no reports yet: it applies)
# Each node installs what check-hotfix staged, with an apt-get that fails (no shell: a
# stand-in first on PATH), and reports the failure through the same route as check-hotfix.
mkdir -p "$work/fakebin"
printf '#!/bin/sh\necho "E: Unable to fetch some archives" >&2\nexit 100\n' >"$work/fakebin/apt-get"
printf '#!/bin/sh\nexit 0\n' >"$work/fakebin/dpkg"
chmod +x "$work/fakebin/apt-get" "$work/fakebin/dpkg"
for node in "$imds_port:$node_vm" "$other_imds_port:$other_vm"; do
  port=${node%%:*}
  node_args=("${args[@]/127.0.0.1:$imds_port/127.0.0.1:$port}")
  printf '{}' >"$pointer"
  rm -f "$work/opt/aks-node-controller-hotfix-report.json"
  "$bin/hotfix-agent" "${node_args[@]}" 2>/dev/null
  rc=0
  PATH="$work/fakebin:$PATH" "$bin/hotfix-agent" download-hotfix --hotfix-pointer "$pointer" \
    --current-version 202604.01.0 --os-release "$work/etc/os-release" \
    --apt-sources-dir "$work/etc/apt/sources.list.d" --retry-backoff 10ms \
    --package-binary "$work/opt/aks-node-controller-package" \
    --vhd-binary "$work/opt/aks-node-controller" \
    --hotfix-binary "$work/opt/aks-node-controller-hotfix" \
    --node-custom-data "$work/opt/nodecustomdata.yml" --events-dir "$work/events" \
    --log-file "$work/download.log" \
    --node-config "$work/opt/aks-node-controller-config.json" \
    --nbc-cmd "$work/opt/aks-node-controller-nbc-cmd.sh" \
    --imds-url "http://127.0.0.1:$port/metadata/attested/document?api-version=2025-04-07" \
    --connect-to "127.0.0.1:$proxy_port" 2>/dev/null || rc=$?
  echo "node ${node#*:}: staged $(tr -d '\n' <"$pointer"), download-hotfix exit $rc"
done
grep -h '"msg":"reported hotfix outcome to LPS"' "$work/download.log" || true
rollouts() {
  exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
  printf 'GET /rollouts HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  sed '1,/^\r$/d' <&3
  exec 3<&-
}
for _ in $(seq 60); do rollouts | grep -q '"auto-halted"' && break; sleep 0.5; done
rollouts
grep -h '"msg":"rollout auto-halted"' "$work/lps.log" || true
printf '{}' >"$pointer"
"$bin/hotfix-agent" "${args[@]}" 2>/dev/null
echo "a node booting now is served: $(tr -d '\n' <"$pointer")"

step "what the proxy routed"
cat "$work/haproxy.log"
echo; echo "Everything is under $work. Dry run: $bin/hotfix-agent ${args[*]} --dry-run"
