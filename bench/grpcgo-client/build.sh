#!/usr/bin/env bash
# Builds bench/grpcgo-client OFFLINE in GOPATH mode from Debian packages only:
#   golang-go golang-google-grpc-dev golang-google-protobuf-dev
#   golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc (+ protobuf-compiler)
#   bench/grpcgo-client/build.sh [OUT_DIR]     (default build/bench-go; prints the binary path)
# The message and stub code is generated from proto/akslivepatching/v1/live_patching.proto
# into the reference's own import path (its go_package), inside a private GOPATH; grpc and
# protobuf come from /usr/share/gocode. Nothing is fetched from the network.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/bench-go}" && cd "${1:-$root/build/bench-go}" && pwd)

for tool in go protoc protoc-gen-go protoc-gen-go-grpc; do
  command -v "$tool" >/dev/null || {
    echo "build.sh: $tool missing; apt-get install golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc" >&2
    exit 1
  }
done
[[ -d /usr/share/gocode/src/google.golang.org/grpc ]] || {
  echo "build.sh: grpc-go missing; apt-get install golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev" >&2
  exit 1
}

gopath=$out/gopath
pkg=github.com/Azure/agentbaker/aks-live-patching/pkg/gen/akslivepatching/v1
rm -rf "$gopath/src" && mkdir -p "$gopath/src/$pkg" "$gopath/src/grpcgo-client"
# protoc-gen-go 1.28 matches google.golang.org/protobuf 1.28; protoc-gen-go-grpc is built from
# grpc-go 1.33.3 itself, so its stubs need nothing newer than grpc.SupportPackageIsVersion7.
protoc -I "$root/proto" --go_out="$gopath/src" --go-grpc_out="$gopath/src" \
  "$root/proto/akslivepatching/v1/live_patching.proto"
cp "$here/main.go" "$gopath/src/grpcgo-client/"

export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS='' GOPROXY=off
# CGO_ENABLED=0: a static, pure-Go binary. The production reference is built with Microsoft
# Go's GOEXPERIMENT=ms_nocgo_opensslcrypto (no cgo, OpenSSL loaded at run time), which we
# cannot reproduce; pure-Go crypto without libc or libcrypto to load is the fastest Go can
# start, so this peer is, if anything, quicker than the real aks-node-controller.
export GOCACHE=$out/gocache CGO_ENABLED=0
# Otherwise default `go build` flags, like the reference (no -ldflags="-s -w", no -trimpath).
(cd "$gopath/src/grpcgo-client" && go build -o "$out/grpcgo-client" .)
echo "$out/grpcgo-client"
