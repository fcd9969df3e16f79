#!/usr/bin/env bash
# The local end-to-end demo: live-patching-service, the ALPN-routing proxy in front of an
# "apiserver", an IMDS stand-in whose signer the service trusts, and check-hotfix staging the
# pointer, all on loopback; then download-hotfix's dry run on that pointer, and the real
# download-hotfix taking that hotfix through the repository fast path from a signed apt
# repository the demo serves itself (nginx), with no package manager, and refusing a tampered
# package; then a staged rollout, and a canary that halts itself when the nodes that install it
# report failures (a real Prometheus scraping the service is the evidence).
#   scripts/demo.sh   (ports: DEMO_PROXY_PORT=8443 DEMO_LPS_PORT=50051 DEMO_METRICS_PORT=19090
#                      DEMO_APISERVER_PORT=16443 DEMO_IMDS_PORT=18080 DEMO_FOREIGN_IMDS_PORT=18081
#                      DEMO_OTHER_IMDS_PORT=18082 DEMO_PROMETHEUS_PORT=19091
#                      DEMO_REPO_PORT=18089)
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
repo_port=${DEMO_REPO_PORT:-18089}
fqdn=demo-aks-dns-12345678.hcp.eastus.azmk8s.io

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
# wait_until WHAT COMMAND...: polls COMMAND (every 0.1 s, 30 s at most) until it succeeds.
wait_until() {
  local what=$1
  shift
  for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done
  echo "timed out waiting for $what" >&2; exit 1
}

# A stale process on one of these ports would answer instead of the demo's (and some servers
# share a port silently with SO_REUSEPORT): refuse to start rather than demo the wrong thing.
for p in "$proxy_port" "$lps_port" "$metrics_port" "$api_port" "$imds_port" "$foreign_imds_port" \
  "$other_imds_port" "$prometheus_port" "$repo_port"; do
  if [[ -n "$(ss -Hltn "sport = :$p")" ]]; then
    echo "port $p is already in use; pick others with DEMO_*_PORT (see the top of $0)" >&2
    exit 1
  fi
done

step "cluster CA and certificates (OpenSSL)"
source scripts/lib/certs.sh
# The service's certificate is for the apiserver FQDN, as the apiserver's own: nodes verify it
# for the host they dial (AgentBaker #9351; before, they pinned
# aks-security-patch.data.mcr.microsoft.com).
make_cluster_pki "$work/etc" demo-cluster-ca "$fqdn" "$fqdn"
echo "CA: $work/etc/ca.pem; service cert and apiserver cert, each for $fqdn"
echo "the service's: $(openssl x509 -in "$work/etc/lps.pem" -noout -ext subjectAltName | tail -n +2 | tr -d ' ')"

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
"$bin/live-patching-service" --listen "127.0.0.1:$lps_port" \
  --proxy-protocol --proxy-protocol-from 127.0.0.1/32 \
  --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
  --components-dir "$work/etc/components" --attestation-roots "$work/etc/imds-roots.pem" \
  --metrics-listen "127.0.0.1:$metrics_port" \
  --prometheus-url "http://127.0.0.1:$prometheus_port" \
  --prometheus-selector 'job="live-patching"' --auto-halt-interval 1s \
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

step "hotfix-agent check-hotfix (SNI $fqdn, ALPN aks-live-patching,h2, the service's cert verified for $fqdn against the cluster CA)"
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

hotfix=$(sed -n 's/.*"202604\.01":"\([^"]*\)".*/\1/p' "$pointer")
[[ -n $hotfix ]] || { echo "the staged pointer names no hotfix for 202604.01" >&2; exit 1; }
step "a signed apt repository with aks-node-controller $hotfix (the pointer's hotfix for 202604.01), served by nginx"
# What packages.microsoft.com is to a node, made here by Debian's own tools
# (tests/support/make-signed-repo.sh: gpg, dpkg-deb, apt-ftparchive): a signing key, the package
# under pool/, dists/jammy/{InRelease,Packages.gz} signed with it.
arch=$(dpkg --print-architecture)
mkdir -p "$work/repo-src" "$work/repo-www/ubuntu/22.04"
printf '#!/bin/sh\necho "aks-node-controller %s (from the hotfix package)"\n' "$hotfix" \
  >"$work/repo-src/aks-node-controller"
chmod 0755 "$work/repo-src/aks-node-controller"
signed_repo=tests/support/make-signed-repo.sh
echo "signing key: $("$signed_repo" key "$work/repo-key")"
repo=$work/repo-www/ubuntu/22.04/prod
deb=$("$signed_repo" deb "$repo" --key "$work/repo-key" --version "$hotfix" --ubuntu 22.04 \
  --arch "$arch" --binary "$work/repo-src/aks-node-controller")
echo "package: ${deb#"$work/repo-www/"} ($(stat -c %s "$deb") bytes)"
(cd "$work/repo-www" && find ubuntu/22.04/prod/dists -type f | sort)
# nginx as this user in the foreground, one process, everything it writes in its own folder
# (tests/support/static_http_server.cc's configuration).
source scripts/lib/static_nginx.sh
static_nginx_conf "$work/nginx" "$work/repo-www" "$repo_port"
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e stderr >"$work/nginx/nginx.log" 2>&1 &
pids+=($!)
wait_port "$repo_port"
repo_url=http://127.0.0.1:$repo_port/ubuntu/22.04/prod
echo "serving $repo_url"

step "a scratch Ubuntu 22.04 node: os-release, microsoft-prod.list (signed-by the repository's key), the VHD binary"
node=$work/node-ubuntu
mkdir -p "$node/etc/apt/sources.list.d" "$node/etc/apt/keyrings" "$node/etc/apt/trusted.gpg.d" \
  "$node/opt" "$node/usr/bin" "$node/events"
printf 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="22.04"\n' >"$node/etc/os-release"
cp "$work/repo-key/keyring.gpg" "$node/etc/apt/keyrings/microsoft-prod.gpg"
"$signed_repo" aptsource "$node/etc/apt/sources.list.d/microsoft-prod.list" --uri "$repo_url" \
  --suite jammy --arch "$arch" --signed-by "$node/etc/apt/keyrings/microsoft-prod.gpg"
printf '#!/bin/sh\necho "aks-node-controller 202604.01.0 (VHD)"\n' >"$node/opt/aks-node-controller"
chmod 0755 "$node/opt/aks-node-controller"
echo "os-release: $(tr '\n' ' ' <"$node/etc/os-release")"
echo "microsoft-prod.list: $(cat "$node/etc/apt/sources.list.d/microsoft-prod.list")"
echo "VHD binary: $(stat -c '%A' "$node/opt/aks-node-controller") $("$node/opt/aks-node-controller")"
# A PATH on which apt-get and dpkg only say they were asked, and fail: the fast path must
# not need them (dpkg-deb, gpgv and gpg are the real ones).
mkdir -p "$work/no-package-manager"
for pm in apt-get dpkg; do
  printf '#!/bin/sh\necho "%s would run: $*" | tee -a %s >&2\nexit 100\n' "$pm" \
    "$node/package-manager-runs" >"$work/no-package-manager/$pm"
  chmod +x "$work/no-package-manager/$pm"
done
download_args=(download-hotfix --hotfix-pointer "$pointer" --current-version 202604.01.0
  --os-release "$node/etc/os-release" --apt-sources-dir "$node/etc/apt/sources.list.d"
  --apt-trusted-dir "$node/etc/apt/trusted.gpg.d"
  --vhd-binary "$node/opt/aks-node-controller" --hotfix-binary "$node/opt/aks-node-controller-hotfix"
  --package-binary "$node/usr/bin/aks-node-controller" --node-custom-data "$node/opt/nodecustomdata.yml"
  --retry-backoff 10ms --events-dir "$node/events" --log-file "$node/download.log"
  --node-config "$work/opt/aks-node-controller-config.json"
  --nbc-cmd "$work/opt/aks-node-controller-nbc-cmd.sh"
  --imds-url "http://127.0.0.1:$imds_port/metadata/attested/document?api-version=2025-04-07"
  --connect-to "127.0.0.1:$proxy_port")

step "hotfix-agent download-hotfix: $hotfix through the authenticated repository fast path (apt-get and dpkg not runnable)"
rc=0
PATH="$work/no-package-manager:$PATH" "$bin/hotfix-agent" "${download_args[@]}" 2>/dev/null || rc=$?
echo "exit code $rc"
grep -h -e '"msg":"trying the authenticated repository fast path"' \
  -e '"msg":"downloaded ANC hotfix through authenticated repository fast path"' \
  -e '"msg":"reported hotfix outcome to LPS"' "$node/download.log"
in_package=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/aks-node-controller | sha256sum | cut -d' ' -f1)
staged=$(sha256sum "$node/opt/aks-node-controller-hotfix" | cut -d' ' -f1)
echo "usr/bin/aks-node-controller in the package: sha256 $in_package"
echo "staged $node/opt/aks-node-controller-hotfix: sha256 $staged, $(stat -c %A "$node/opt/aks-node-controller-hotfix") (the VHD binary's mode)"
[[ $rc == 0 && $staged == "$in_package" ]] || { echo "the fast path did not stage the package's binary" >&2; exit 1; }
echo "it runs: $("$node/opt/aks-node-controller-hotfix")"
if [[ -e $node/package-manager-runs ]]; then
  cat "$node/package-manager-runs"; echo "a package manager ran" >&2; exit 1
fi
[[ -e $node/usr/bin/aks-node-controller ]] || echo "apt-get / dpkg: never run; nothing installed at $node/usr/bin/aks-node-controller"
echo "nginx's access log (what the node fetched):"
cat "$work/nginx/access.log"

step "the same package with one byte changed: integrity failure, the staged hotfix deleted, no apt-get"
# The earlier hotfix a previous boot staged, which the launcher would run if it stayed.
printf '#!/bin/sh\necho "aks-node-controller 202604.01.2 (an earlier hotfix)"\n' \
  >"$node/opt/aks-node-controller-hotfix"
chmod 0755 "$node/opt/aks-node-controller-hotfix"
echo "staged before: $("$node/opt/aks-node-controller-hotfix")"
offset=$(($(stat -c %s "$deb") / 2))
byte=$(od -An -tu1 -j "$offset" -N1 "$deb" | tr -d ' ')
printf '%b' "\\0$(printf '%03o' $(((byte + 1) % 256)))" | dd of="$deb" bs=1 seek="$offset" conv=notrunc status=none
echo "byte $offset of ${deb##*/}: $byte -> $(od -An -tu1 -j "$offset" -N1 "$deb" | tr -d ' ') (InRelease and Packages.gz untouched: they still sign the original)"
: >"$work/nginx/access.log"
rc=0
PATH="$work/no-package-manager:$PATH" "$bin/hotfix-agent" "${download_args[@]}" 2>/dev/null || rc=$?
echo "exit code $rc"
grep -h -e '"msg":"download-hotfix failed"' -e 'integrity' "$node/download.log" | tail -n 3
[[ $rc == 1 ]] || { echo "want exit 1 after an integrity failure" >&2; exit 1; }
if [[ -e $node/opt/aks-node-controller-hotfix ]]; then
  echo "the staged hotfix survived an integrity failure" >&2; exit 1
fi
echo "$node/opt/aks-node-controller-hotfix: deleted (the launcher falls back to the VHD binary)"
if [[ -e $node/package-manager-runs ]]; then
  cat "$node/package-manager-runs"; echo "a package manager ran" >&2; exit 1
fi
echo "apt-get / dpkg: never run"
echo "nginx's access log:"
cat "$work/nginx/access.log"

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
# Both certificates name $fqdn now: which one answered is told by its fingerprint.
openssl s_client -connect "127.0.0.1:$proxy_port" -servername "$fqdn" -alpn h2 \
  -CAfile "$work/etc/ca.pem" </dev/null >"$work/s_client.out" 2>/dev/null || true
grep -E "^subject=|^ALPN protocol|^Verify return code" "$work/s_client.out" || true
fingerprint() { openssl x509 -noout -fingerprint -sha256 "$@" | cut -d= -f2; }
answered=$(fingerprint <"$work/s_client.out" 2>/dev/null || true)
if [[ $answered == "$(fingerprint -in "$work/etc/apiserver.pem")" ]]; then
  echo "certificate $answered: the apiserver's"
elif [[ $answered == "$(fingerprint -in "$work/etc/lps.pem")" ]]; then
  echo "certificate $answered: the service's (the proxy routed an h2-only client to it)" >&2; exit 1
else
  echo "no certificate from the proxy" >&2; exit 1
fi

rollouts() {  # GET /rollouts: the rollouts the service holds now, and their state
  exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
  printf 'GET /rollouts HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  sed '1,/^\r$/d' <&3
  exec 3<&-
}
rollouts_show() { rollouts | grep -q -- "$1"; }

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
# The store reloads within a second (inotify, 200 ms debounce): until the service holds it.
wait_until "the service to load anc-202604.01.4-canary" rollouts_show '"anc-202604.01.4-canary"'
# check_node IMDS_PORT VMID POINTER: check-hotfix as that node (its IMDS stand-in), the pointer
# holding POINTER before; prints what it staged.
check_node() {
  local node_args=("${args[@]/127.0.0.1:$imds_port/127.0.0.1:$1}")
  printf '%s' "$3" >"$pointer"
  "$bin/hotfix-agent" "${node_args[@]}" 2>/dev/null
  echo "node $2: $(tr -d '\n' <"$pointer")"
}
check_each_node() {  # POINTER: check_node for both nodes
  check_node "$imds_port" "$node_vm" "$1"
  check_node "$other_imds_port" "$other_vm" "$1"
}
check_each_node '{"version":"202604.01.2","scripts_version":"202604.01.1"}'
step "live-patching-service plan: why each node gets what it gets"
for vm in "$node_vm" "$other_vm"; do
  "$bin/live-patching-service" plan --components-dir "$work/etc/components" \
    --component aksNodeController --vm-id "$vm" \
    --subscription 8d10da13-8125-4ba9-a717-bf7490507b3d --cluster "$fqdn"
done
step "the rollouts' status (127.0.0.1:$metrics_port/rollouts)"
rollouts

step "a gated canary: 202604.01.5 for half the nodes (50 %), for all (100 %) only once one of them reported that it provisioned with it"
# The name draws node $node_vm into the half (bucket 3919) and $other_vm out of it (5483).
start_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
gate_at=$(date -u -d "$start_at + 1 second" +%Y-%m-%dT%H:%M:%SZ)
cat >"$work/etc/components/.next.tmp" <<JSON
{
  "hotfixes": {"202604.01": "202604.01.3", "202605.30": "202605.30.1"},
  "rollouts": [
    {
      "name": "anc-202604.01.5-gated-3",
      "hotfixes": {"202604.01": "202604.01.5"},
      "steps": [
        {"at": "$start_at", "percent": 50},
        {"at": "$gate_at", "percent": 100, "gate": {"min_nodes": 1, "bake": "2s"}}
      ]
    }
  ]
}
JSON
mv "$work/etc/components/.next.tmp" "$work/etc/components/aksNodeController.json"
gated_row() { rollouts | grep -E '"(percent|state|missing|open_at|started_at)":' | tr -s ' ' | tr -d '\n'; }
wait_until "the gate to wait on evidence" rollouts_show '"missing": "0 of 1 reporting nodes"'
echo "GET /rollouts:$(gated_row)"
check_each_node '{}'
# Node $node_vm provisions with its hotfix binary (a stand-in that exits 0) and says so, as
# deploy/node/aks-node-controller-hotfix.sh does after provision.
printf '{}' >"$pointer"
"$bin/hotfix-agent" "${args[@]}" 2>/dev/null
printf '#!/bin/sh\nexit 0\n' >"$work/opt/gated-hotfix-binary" && chmod 755 "$work/opt/gated-hotfix-binary"
"$bin/hotfix-agent" report --outcome succeeded --hotfix-pointer "$pointer" \
  --current-version 202604.01.0 --hotfix-binary "$work/opt/gated-hotfix-binary" \
  --node-config "$work/opt/aks-node-controller-config.json" \
  --nbc-cmd "$work/opt/aks-node-controller-nbc-cmd.sh" \
  --imds-url "http://127.0.0.1:$imds_port/metadata/attested/document?api-version=2025-04-07" \
  --connect-to "127.0.0.1:$proxy_port" --log-file "$work/report.log" 2>/dev/null
grep -h '"msg":"reported hotfix outcome to LPS"' "$work/report.log" || true
wait_until "the gate to open and the step to start on that evidence" rollouts_show '"state": "started"'
echo "GET /rollouts:$(gated_row)"
grep -h '"msg":"rollout step started on its evidence"' "$work/lps.log" || true
check_node "$other_imds_port" "$other_vm now" '{}'

step "a canary that halts itself: 202604.01.5 for both nodes, halting past 40% failed of 2 nodes"
# Its evidence counts from now (auto_halt.since): nodes, each once, whatever they send.
since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cat >"$work/etc/components/.next.tmp" <<JSON
{
  "hotfixes": {"202604.01": "202604.01.3", "202605.30": "202605.30.1"},
  "rollouts": [
    {
      "name": "anc-202604.01.5-canary",
      "hotfixes": {"202604.01": "202604.01.5"},
      "steps": [{"at": "2026-01-01T00:00:00Z", "percent": 100}],
      "auto_halt": {"max_failure_percent": 40, "min_reports": 2, "since": "$since"}
    }
  ]
}
JSON
mv "$work/etc/components/.next.tmp" "$work/etc/components/aksNodeController.json"
# Until it is loaded and judged once (no reports yet: it applies); it is the only rollout with
# an auto_halt, so the only one with an evaluated_at.
wait_until "the service to load anc-202604.01.5-canary" rollouts_show '"anc-202604.01.5-canary"'
wait_until "a first evaluation of anc-202604.01.5-canary" rollouts_show '"evaluated_at": "'
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
wait_until "the canary to halt itself" rollouts_show '"auto-halted"'
rollouts
grep -h '"msg":"rollout auto-halted"' "$work/lps.log" || true
printf '{}' >"$pointer"
"$bin/hotfix-agent" "${args[@]}" 2>/dev/null
echo "a node booting now is served: $(tr -d '\n' <"$pointer")"

step "what the proxy routed"
cat "$work/haproxy.log"
echo; echo "Everything is under $work. Dry run: $bin/hotfix-agent ${args[*]} --dry-run"
