#!/usr/bin/env bash
# Installs the Debian 12 packages this project needs. Idempotent and non-interactive: it asks
# apt only for what is missing.
#   scripts/install-deps.sh          build + tests + demo
#   scripts/install-deps.sh --bench  also the benchmark and load tools (hyperfine, time, stress-ng)
set -euo pipefail

build=(build-essential cmake ninja-build pkg-config clang-format
       libssl-dev libnghttp2-dev libprotobuf-dev protobuf-compiler
       libgrpc++-dev protobuf-compiler-grpc nlohmann-json3-dev libcli11-dev
       libboost-dev libcpp-httplib-dev libgtest-dev libgmock-dev
       libyaml-cpp-dev zlib1g-dev
       libarchive-dev libexpat1-dev)  # the repository fast path: tar/cpio payloads, repomd.xml
service=(prometheus-cpp-dev libmicrohttpd-dev)  # the registry; the metrics listener's HTTP
test=(haproxy tinyproxy nginx-light libnginx-mod-stream openssl netcat-openbsd procps iproute2
      strace clang libclang-rt-14-dev  # the ASan test build; libFuzzer: scripts/fuzz.sh
      nghttp2-client curl              # h2load and gRPC calls: bench/soak.sh's short form
      prometheus                       # the automatic halt's evidence: service_auto_halt_e2e_test
      python3-h2                       # Python's HTTP/2 client: service_refusal_clients_test
      # grpc-go, the reference's gRPC: service_grpcgo_test calls the service with it
      golang-go golang-google-grpc-dev golang-google-protobuf-dev
      golang-github-golang-protobuf-1-5-dev golang-github-fullsailor-pkcs7-dev
      protoc-gen-go protoc-gen-go-grpc
      # the container image, built and run as root with no registry: deploy/container/
      # build-image.sh (mmdebstrap makes the Debian base images), tests/container/image_test.sh;
      # runc because crun refuses cgroup-v1 (hybrid) hosts
      podman runc mmdebstrap
      # real signed apt and yum repositories for the repository fast path's tests, the demo
      # and the benchmark (tests/support/make-signed-repo.sh), and the node's gpgv, dpkg-deb,
      # rpmkeys and rpm2cpio they are checked with
      gnupg gpgv dpkg-dev apt-utils rpm rpm2cpio createrepo-c)
bench=(hyperfine time stress-ng)  # stress-ng: the load part of scripts/reliability.sh

# Debian's kubectl (kubernetes-client, 1.20; its `kubectl kustomize` is kustomize v2.0.3):
# deploy_config_test renders deploy/kubernetes with it, the oldest kustomize the base must
# render with. Unpacked, not installed: Google's `kubectl` package, which machines of this
# kind carry, owns /usr/bin/kubectl too, and dpkg refuses kubernetes-client ("trying to
# overwrite '/usr/bin/kubectl', which is also in package kubectl"). So `apt-get download` and
# `dpkg-deb -x` into a folder of its own; the test runs that binary, never the one on PATH.
kubectl_dir=/opt/debian-kubernetes-client
debian_kubectl() {
  local sudo=() version tmp
  if ((EUID != 0)); then sudo=(sudo); fi
  version=$(apt-cache policy kubernetes-client | awk '/Candidate:/ {print $2}')
  if [[ -z "$version" || "$version" == "(none)" ]]; then
    "${sudo[@]}" apt-get update -qq
    version=$(apt-cache policy kubernetes-client | awk '/Candidate:/ {print $2}')
  fi
  if [[ -x "$kubectl_dir/usr/bin/kubectl" &&
        "$(cat "$kubectl_dir/VERSION" 2>/dev/null)" == "$version" ]]; then
    return 0
  fi
  echo "install-deps: unpacking kubernetes-client $version into $kubectl_dir"
  tmp=$(mktemp -d)
  if ((EUID == 0)) && id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi  # apt's sandbox user
  (cd "$tmp" && apt-get download -qq "kubernetes-client=$version")
  "${sudo[@]}" rm -rf "$kubectl_dir.new"
  "${sudo[@]}" mkdir -p "$kubectl_dir.new"
  "${sudo[@]}" dpkg-deb -x "$tmp"/kubernetes-client_*.deb "$kubectl_dir.new"
  echo "$version" | "${sudo[@]}" tee "$kubectl_dir.new/VERSION" >/dev/null
  "${sudo[@]}" rm -rf "$kubectl_dir"
  "${sudo[@]}" mv "$kubectl_dir.new" "$kubectl_dir"
  rm -rf "$tmp"
}

# npm for grpc-js, the Node.js gRPC service_refusal_clients_test calls with (Debian 12 does not
# package grpc-js; npm installs the versions tests/integration/clients/grpcjs pins). Machines
# of this kind carry Node.js with its npm; elsewhere Debian's npm (and nodejs) does.
if ! command -v npm >/dev/null 2>&1; then test+=(npm); fi
want=("${build[@]}" "${service[@]}" "${test[@]}")
if [[ "${1:-}" == "--bench" ]]; then want+=("${bench[@]}"); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  debian_kubectl
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

sudo=()
if ((EUID != 0)); then sudo=(sudo); fi
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
# Proxy packages start system services on install; tests run their own instances.
for unit in haproxy nginx tinyproxy prometheus prometheus-node-exporter; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$unit" 2>/dev/null; then
    "${sudo[@]}" systemctl stop "$unit" || true
  fi
done
debian_kubectl
echo "install-deps: done"
