# shellcheck shell=bash
# Sourced by bench/grpcgo-client/build.sh and bench/grpcgo-server/build.sh: Go programs built
# OFFLINE in GOPATH mode from Debian packages only (golang-go golang-google-grpc-dev
# golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev protoc-gen-go
# protoc-gen-go-grpc, and protobuf-compiler). The message and stub code is generated from
# proto/akslivepatching/v1/live_patching.proto into the reference's own import path (its
# go_package) inside a private GOPATH; grpc and protobuf come from /usr/share/gocode. Nothing
# is fetched from the network.

# go_offline_gopath ROOT OUT [GOCODE_PACKAGE:DEBIAN_PACKAGE ...]: checks the tools and the
# packages under /usr/share/gocode/src, sets `gopath` to OUT/gopath holding the generated
# code, and exports the GOPATH-mode environment with GOCACHE in OUT and CGO_ENABLED=0 (a
# static, pure-Go binary: crypto/tls in Go, no libc or libcrypto to load).
go_offline_gopath() {
  local root=$1 out=$2 tool need
  shift 2
  for tool in go protoc protoc-gen-go protoc-gen-go-grpc; do
    command -v "$tool" >/dev/null || {
      echo "build.sh: $tool missing; apt-get install golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc" >&2
      exit 1
    }
  done
  for need in "google.golang.org/grpc:golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev" "$@"; do
    [[ -d /usr/share/gocode/src/${need%%:*} ]] || {
      echo "build.sh: ${need%%:*} missing; apt-get install ${need#*:}" >&2
      exit 1
    }
  done
  gopath=$out/gopath
  local pkg=github.com/Azure/agentbaker/aks-live-patching/pkg/gen/akslivepatching/v1
  rm -rf "$gopath/src" && mkdir -p "$gopath/src/$pkg"
  # protoc-gen-go 1.28 matches google.golang.org/protobuf 1.28; protoc-gen-go-grpc is built
  # from grpc-go 1.33.3 itself, so its stubs need nothing newer than
  # grpc.SupportPackageIsVersion7.
  protoc -I "$root/proto" --go_out="$gopath/src" --go-grpc_out="$gopath/src" \
    "$root/proto/akslivepatching/v1/live_patching.proto"
  export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS='' GOPROXY=off
  export GOCACHE=$out/gocache CGO_ENABLED=0
}
