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
       libyaml-cpp-dev zlib1g-dev)
service=(prometheus-cpp-dev libcivetweb-dev)
test=(haproxy tinyproxy nginx-light libnginx-mod-stream openssl netcat-openbsd procps iproute2
      strace clang libclang-rt-14-dev  # clang + libFuzzer: scripts/fuzz.sh
      nghttp2-client curl              # h2load and gRPC calls: bench/soak.sh's short form
      prometheus                       # the automatic halt's evidence: service_auto_halt_e2e_test
      # grpc-go, the reference's gRPC: service_grpcgo_test calls the service with it
      golang-go golang-google-grpc-dev golang-google-protobuf-dev
      golang-github-golang-protobuf-1-5-dev golang-github-fullsailor-pkcs7-dev
      protoc-gen-go protoc-gen-go-grpc)
bench=(hyperfine time stress-ng)  # stress-ng: the load part of scripts/reliability.sh

want=("${build[@]}" "${service[@]}" "${test[@]}")
if [[ "${1:-}" == "--bench" ]]; then want+=("${bench[@]}"); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
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
echo "install-deps: done"
