#!/usr/bin/env bash
# Builds bench/grpcgo-client offline from Debian packages only (bench/lib/go_offline.sh).
#   bench/grpcgo-client/build.sh [OUT_DIR]     (default build/bench-go; prints the binary path)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/bench-go}" && cd "${1:-$root/build/bench-go}" && pwd)
source "$root/bench/lib/go_offline.sh"
go_offline_gopath "$root" "$out"
mkdir -p "$gopath/src/grpcgo-client"
cp "$here/main.go" "$gopath/src/grpcgo-client/"
# CGO_ENABLED=0 (go_offline_gopath): the production reference is built with Microsoft Go's
# GOEXPERIMENT=ms_nocgo_opensslcrypto (no cgo, OpenSSL loaded at run time), which we cannot
# reproduce; pure-Go crypto without libc or libcrypto to load is the fastest Go can start, so
# this peer is, if anything, quicker than the real aks-node-controller.
# Otherwise default `go build` flags, like the reference (no -ldflags="-s -w", no -trimpath).
(cd "$gopath/src/grpcgo-client" && go build -o "$out/grpcgo-client" .)
echo "$out/grpcgo-client"
