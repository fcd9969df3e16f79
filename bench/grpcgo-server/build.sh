#!/usr/bin/env bash
# Builds bench/grpcgo-server OFFLINE in GOPATH mode from Debian packages only:
#   golang-go golang-google-grpc-dev golang-google-protobuf-dev
#   golang-github-golang-protobuf-1-5-dev golang-github-fullsailor-pkcs7-dev protoc-gen-go protoc-gen-go-grpc (+ protobuf-compiler)
#   bench/grpcgo-server/build.sh [OUT_DIR]     (default build/bench-go-server; prints the server's path;
#                                               benchclient lands next to it)
# The message and stub code is generated from proto/akslivepatching/v1/live_patching.proto
# into the reference's own import path (its go_package), inside a private GOPATH; grpc and
# protobuf come from /usr/share/gocode. Nothing is fetched from the network.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/bench-go-server}" && cd "${1:-$root/build/bench-go-server}" && pwd)

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

[[ -d /usr/share/gocode/src/github.com/fullsailor/pkcs7 ]] || {
  echo "build.sh: pkcs7 missing; apt-get install golang-github-fullsailor-pkcs7-dev" >&2
  exit 1
}
gopath=$out/gopath
pkg=github.com/Azure/agentbaker/aks-live-patching/pkg/gen/akslivepatching/v1
rm -rf "$gopath/src" && mkdir -p "$gopath/src/$pkg" "$gopath/src/grpcgo-server" "$gopath/src/benchclient"
# protoc-gen-go 1.28 matches google.golang.org/protobuf 1.28; protoc-gen-go-grpc is built from
# grpc-go 1.33.3 itself, so its stubs need nothing newer than grpc.SupportPackageIsVersion7.
protoc -I "$root/proto" --go_out="$gopath/src" --go-grpc_out="$gopath/src" \
  "$root/proto/akslivepatching/v1/live_patching.proto"
cp "$here/main.go" "$gopath/src/grpcgo-server/"
cp "$here/benchclient/main.go" "$gopath/src/benchclient/"

export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS='' GOPROXY=off
# CGO_ENABLED=0: a static, pure-Go binary (crypto/tls and the PKCS#7 check in pure Go).
export GOCACHE=$out/gocache CGO_ENABLED=0
# Otherwise default `go build` flags.
(cd "$gopath/src/grpcgo-server" && go build -o "$out/grpcgo-server" .)
# The bench's helper: real calls to validate grpc-status, and idle connections for RSS.
(cd "$gopath/src/benchclient" && go build -o "$out/benchclient" .)
echo "$out/grpcgo-server"
