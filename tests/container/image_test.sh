#!/usr/bin/env bash
# The service's container image, run here (podman, runc, host network), as a cluster runs it:
#   - `--version` of live-patching-service and of hotfix-agent in the image print the version
#     and git revision deploy/container/build-image.sh stamped, and the OCI labels say the same;
#   - the container runs as uid/gid 65532 with a read-only root filesystem (no tmpfs either:
#     the service writes nothing) under a memory limit its cgroup reports;
#   - gRPC health answers SERVING on the health port (h2c, curl);
#   - a real `hotfix-agent check-hotfix` (the host's binary, with the IMDS stand-in signing its
#     attested document) gets the component's hotfix from the containerized service over TLS
#     (the service's certificate is for the apiserver FQDN, which the node verifies it for:
#     AgentBaker #9351) and stages the pointer;
#   - SIGTERM drains and stops the container with exit 0;
#   - the image's `rollout halt` edits an operator's mounted folder when run with their --user
#     (and cannot as its own uid), as docs/OPERATIONS.md's one-step halt runs it.
# It prints the image size. Run after build-image.sh:
#   deploy/container/build-image.sh && tests/container/image_test.sh
#   tests/container/image_test.sh [DIR]   DIR (or IMAGE_DIR) as build-image.sh's, default
#                                         build/image; the image is DIR/image.env's
# Host binaries: BIN_DIR (default build/release/bin, scripts/test.sh's Release build) with hotfix-agent
# and imds-standin; when they are missing they are built in build/image-host. As root (the
# files the container reads are given to its uid), like build-image.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
t_start=$SECONDS

dir=${1:-${IMAGE_DIR:-build/image}}
dir=$(cd "$dir" && pwd)
[[ -f $dir/image.env ]] || { echo "no $dir/image.env: run deploy/container/build-image.sh" >&2; exit 1; }
# shellcheck source=/dev/null
source "$dir/image.env"  # IMAGE SERVICE_VERSION[_FROM] AGENT_VERSION GIT_REVISION IMAGE_SIZE
                         # PODMAN_STORAGE_DRIVER (the storage's: podman refuses another)
podman=(podman --root "$dir/store" --runroot "$dir/run" --tmpdir "$dir/tmp"
        --storage-driver "${PODMAN_STORAGE_DRIVER:-vfs}" --runtime runc)
ulimits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect_eq() {  # what, got, want
  if [[ $2 == "$3" ]]; then pass "$1: $2"; else fail "$1: got '$2', want '$3'"; fi
}
expect_match() {  # what, got, regex
  if [[ $2 =~ $3 ]]; then pass "$1"; else fail "$1: '$2' does not match /$3/"; fi
}

bin=${BIN_DIR:-build/release/bin}
if [[ ! -x $bin/hotfix-agent || ! -x $bin/imds-standin ]]; then
  echo "image_test: building hotfix-agent and imds-standin in build/image-host"
  cmake -S . -B build/image-host -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C build/image-host -j2 hotfix-agent imds-standin >/dev/null
  bin=build/image-host/bin
fi
bin=$(cd "$bin" && pwd)

work=$(mktemp -d /tmp/lps-image-test.XXXXXX)
chmod 0755 "$work"  # the container's uid reaches the mounted files through it
name=lps-image-test-$$
pids=()
cleanup() {
  "${podman[@]}" rm --force --time 0 "$name" >/dev/null 2>&1 || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== the image: $IMAGE"
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$IMAGE")
echo "image size: $size bytes ($((size / 1000000)) MB)"

echo "== the stamped versions"
want_version=$(sed -n 's/^project([^ ]* VERSION \([0-9][0-9.]*\).*/\1/p' CMakeLists.txt)
if [[ ${SERVICE_VERSION_FROM:-} == CMakeLists.txt ]]; then
  expect_eq "build-image.sh's version is CMakeLists.txt's" "$SERVICE_VERSION" "$want_version"
fi
expect_match "the revision is git's short one (or unknown)" "$GIT_REVISION" \
  '^([0-9a-f]{12}(-dirty)?|unknown)$'
if [[ $GIT_REVISION != unknown ]] && git rev-parse --git-dir >/dev/null 2>&1; then
  if git cat-file -e "${GIT_REVISION%-dirty}^{commit}" 2>/dev/null; then
    pass "revision ${GIT_REVISION%-dirty} is a commit of this repository"
  else
    fail "revision ${GIT_REVISION%-dirty} is not a commit of this repository"
  fi
fi
run=("${podman[@]}" run --rm --network=host "${ulimits[@]}")
expect_eq "live-patching-service --version" "$("${run[@]}" "$IMAGE" --version)" \
  "live-patching-service $SERVICE_VERSION (revision $GIT_REVISION)"
expect_eq "hotfix-agent --version" \
  "$("${run[@]}" --entrypoint /usr/bin/hotfix-agent "$IMAGE" --version)" \
  "hotfix-agent $AGENT_VERSION (revision $GIT_REVISION)"
label() { "${podman[@]}" image inspect --format "{{index .Labels \"org.opencontainers.image.$1\"}}" "$IMAGE"; }
expect_eq "label version" "$(label version)" "$SERVICE_VERSION"
expect_eq "label revision" "$(label revision)" "$GIT_REVISION"
expect_match "label source" "$(label source)" '.'
expect_eq "image user" "$("${podman[@]}" image inspect --format '{{.Config.User}}' "$IMAGE")" \
  "65532:65532"

echo "== rollout halt from the image on a mounted folder (docs/OPERATIONS.md, \"Halt a rollout\")"
# An operator's checkout: owned by the operator (uid 1000 here), not by root or the image's user.
halt_dir=$work/overlay/components
mkdir -p "$halt_dir"
printf '%s\n' '{"hotfixes":{"202604.01":"202604.01.3"},"rollouts":[{"name":"canary",' \
  '"hotfixes":{"202604.01":"202604.01.4"},"steps":[{"at":"2026-01-01T00:00:00Z","percent":10}]}]}' \
  >"$halt_dir/aksNodeController.json"
chown -R 1000:1000 "$work/overlay"
before=$(cat "$halt_dir/aksNodeController.json")
halt=(rollout halt canary --components-dir /components --reason "INC-1: image test")
# As the image's own user (65532) the tool cannot write the checkout: refused, file untouched.
out=$("${run[@]}" --read-only -v "$halt_dir:/components" "$IMAGE" "${halt[@]}" 2>&1) && rc=0 || rc=$?
expect_eq "rollout halt as uid 65532 on the operator's folder: exit code" "$rc" 1
expect_eq "the folder is untouched" "$(cat "$halt_dir/aksNodeController.json")" "$before"
# As the docs run it: --user "$(id -u):$(id -g)" of the checkout's owner.
out=$("${run[@]}" --read-only --user 1000:1000 -v "$halt_dir:/components" "$IMAGE" "${halt[@]}" 2>&1) \
  && rc=0 || rc=$?
expect_eq "rollout halt as the folder's owner: exit code" "$rc" 0
expect_match "it prints the percent before and after" "$out" \
  'rollout "canary": percent 10 -> 0 \(halted\) at '
halted=$(cat "$halt_dir/aksNodeController.json")
expect_match "the file says halted" "$halted" '"halted": true'
expect_match "with who, when and why" "$halted" \
  '"halt_note": \{[^}]*"at": "20[0-9-]+T[0-9:]+Z",[^}]*"by": "(uid )?1000@[^"]+",[^}]*"reason": "INC-1: image test"'
expect_eq "the edited file is still the operator's" "$(stat -c %u:%g "$halt_dir/aksNodeController.json")" \
  "1000:1000"

echo "== the files the service reads, owned by its uid (mounted read-only)"
fqdn=image-test-aks-dns-12345678.hcp.eastus.azmk8s.io
etc=$work/etc
mkdir -p "$etc/components" "$work/node/events"
# shellcheck source=/dev/null
source scripts/lib/certs.sh
# The service's certificate for the apiserver FQDN: nodes verify it for the host they dial
# (AgentBaker #9351; they pinned aks-security-patch.data.mcr.microsoft.com before).
make_cluster_pki "$etc" image-test-cluster-ca "$fqdn" "$fqdn"
"$bin/imds-standin" --listen 127.0.0.1:0 --write-signer-ca "$etc/imds-root.pem" \
  >"$work/imds.out" 2>"$work/imds.log" &
pids+=($!)
imds_url=
for _ in $(seq 100); do
  imds_url=$(sed -n 's/^imds-standin listening on //p' "$work/imds.out")
  [[ -n $imds_url && -s $etc/imds-root.pem ]] && break
  sleep 0.1
done
[[ -n $imds_url ]] || { cat "$work/imds.log" >&2; echo "imds-standin did not start" >&2; exit 1; }
printf '{"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}}' \
  >"$etc/components/aksNodeController.json"
chown -R 65532:65532 "$etc"
chmod -R go-rwx "$etc"  # the TLS key stays the service's: only uid 65532 reads any of it

echo "== the service in the container (uid 65532, read-only root, 256 MiB, host network)"
"${podman[@]}" run --name "$name" --network=host "${ulimits[@]}" --memory 256m \
  --user 65532:65532 --read-only --read-only-tmpfs=false -v "$etc:$etc:ro" "$IMAGE" \
  --listen 127.0.0.1:0 --health-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --tls-cert "$etc/lps.pem" --tls-key "$etc/lps.key" --components-dir "$etc/components" \
  --attestation-roots "$etc/imds-root.pem" >"$work/lps.out" 2>"$work/lps.log" &
podman_run=$!
serving=
for _ in $(seq 300); do
  serving=$(grep -m1 '"msg":"live-patching-service serving"' "$work/lps.log" || true)
  [[ -n $serving ]] && break
  kill -0 "$podman_run" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $serving ]]; then
  cat "$work/lps.log" >&2
  echo "the service did not start in the container" >&2
  exit 1
fi
field() { sed -n "s/.*\"$1\":\\(\"[^\"]*\"\\|[0-9]*\\).*/\\1/p" <<<"$serving" | tr -d '"'; }
port=$(field port) health_port=$(field health_port) metrics_port=$(field metrics_port)
echo "serving: TLS $port, health $health_port, metrics $metrics_port"
expect_eq "serving line's version" "$(field version)" "$SERVICE_VERSION"
expect_eq "memory limit read from the container's cgroup" \
  "$(field memory_limit) from $(field memory_limit_from)" "256Mi from cgroup"

echo "== uid and read-only root filesystem"
pid=$("${podman[@]}" inspect --format '{{.State.Pid}}' "$name")
expect_eq "the service process's uids (real effective saved fs)" \
  "$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$pid/status")" "65532 65532 65532 65532"
expect_eq "its gids" "$(awk '/^Gid:/ {print $2, $3, $4, $5}' "/proc/$pid/status")" \
  "65532 65532 65532 65532"
expect_eq "its root mount's options" \
  "$(awk '$5 == "/" {split($6, o, ","); print o[1]}' "/proc/$pid/mountinfo")" "ro"
expect_eq "podman's ReadonlyRootfs" \
  "$("${podman[@]}" inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$name")" "true"
for path in / /tmp /var/tmp /run; do
  out=$("${podman[@]}" exec "$name" sh -c "touch $path/write-probe 2>&1" || true)
  expect_match "nothing can be written to $path" "$out" 'Read-only file system'
done

echo "== gRPC health on the health port"
printf '\0\0\0\0\0' >"$work/health.req"  # an empty HealthCheckRequest, length-prefixed
curl -sS --max-time 5 --http2-prior-knowledge -D "$work/health.headers" -o "$work/health.body" \
  -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @"$work/health.req" \
  "http://127.0.0.1:$health_port/grpc.health.v1.Health/Check"
expect_eq "health grpc-status" \
  "$(sed -n 's/^grpc-status: *\([0-9]*\).*/\1/p' "$work/health.headers")" "0"
# HealthCheckResponse{status: SERVING (1)}: field 1 varint 1, length-prefixed (5 bytes).
expect_eq "health response" "$(od -An -tx1 "$work/health.body" | tr -s ' \n' ' ')" \
  " 00 00 00 00 02 08 01 "
expect_match "metrics answer on the metrics port" \
  "$(curl -sS --max-time 5 "http://127.0.0.1:$metrics_port/metrics")" \
  'lp_memory_limit_bytes 268435456'

echo "== hotfix-agent check-hotfix (host) against the containerized service"
node=$work/node
cat >"$node/aks-node-controller-config.json" <<JSON
{"version":"v1","api_server_config":{"api_server_name":"$fqdn"},
 "kubernetes_ca_cert":"$(base64 -w0 "$etc/ca.pem")"}
JSON
pointer=$node/aks-node-controller-hotfix.json
printf '{"version":"202604.01.2","scripts_version":"202604.01.1"}' >"$pointer"
agent_rc=0
env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u no_proxy -u NO_PROXY \
  "$bin/hotfix-agent" check-hotfix --node-config "$node/aks-node-controller-config.json" \
  --nbc-cmd "$node/aks-node-controller-nbc-cmd.sh" --hotfix-pointer "$pointer" \
  --imds-url "$imds_url/metadata/attested/document?api-version=2025-04-07" \
  --connect-to "127.0.0.1:$port" --events-dir "$node/events" \
  --log-file "$node/aks-node-controller.log" --current-version 202604.01.0 \
  >"$work/agent.out" 2>"$work/agent.err" || agent_rc=$?
expect_eq "check-hotfix exit code" "$agent_rc" 0
expect_match "check-hotfix outcome" "$(cat "$work/agent.out" "$work/agent.err")" \
  '"msg":"check-hotfix completed","outcome":"lpsRead"'
expect_eq "guest-agent events written" "$(find "$node/events" -type f | wc -l)" 1
expect_match "the event's outcome" "$(cat "$node"/events/*)" 'lpsRead'
# The served map staged for download-hotfix; version and scripts_version kept.
staged=$(tr -d ' \n' <"$pointer")
expect_match "the staged pointer has the served hotfixes" "$staged" \
  '"hotfixes":\{"202604\.01":"202604\.01\.3","202605\.30":"202605\.30\.1"\}'
expect_match "the staged pointer keeps version and scripts_version" "$staged" \
  '"version":"202604\.01\.2",.*"scripts_version":"202604\.01\.1"'
expect_match "the service logged the node's call as served" \
  "$(grep -v '"msg":"live-patching-service serving"' "$work/lps.log")" \
  '"msg":"GetComponentConfig".*"component":"aksNodeController","code":"OK"'

echo "== SIGTERM stops it cleanly"
t0=$(date +%s%N)
"${podman[@]}" kill --signal TERM "$name" >/dev/null
run_rc=0
wait "$podman_run" || run_rc=$?
echo "stopped in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
expect_eq "podman run's exit code (the service's)" "$run_rc" 0
expect_eq "the container's exit code" \
  "$("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")" 0
expect_match "the service drained on SIGTERM" "$(cat "$work/lps.log")" \
  '"msg":"termination signal received","signal":"SIGTERM"'
"${podman[@]}" rm "$name" >/dev/null

echo "image_test: $IMAGE, $size bytes ($((size / 1000000)) MB), revision $GIT_REVISION;" \
  "$((SECONDS - t_start)) s"
if ((failures > 0)); then
  echo "image_test: $failures FAILED" >&2
  echo "--- service log" >&2; cat "$work/lps.log" >&2
  echo "--- agent" >&2; cat "$work/agent.out" "$work/agent.err" >&2 2>/dev/null || true
  exit 1
fi
echo "image_test: all passed"
