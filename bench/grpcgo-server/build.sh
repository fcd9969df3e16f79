#!/usr/bin/env bash
# Builds bench/grpcgo-server and its benchclient offline from Debian packages only
# (bench/lib/go_offline.sh, plus golang-github-fullsailor-pkcs7-dev for the server's check of
# the attested document).
#   bench/grpcgo-server/build.sh [OUT_DIR]     (default build/bench-go-server; prints the
#                                               server's path; benchclient lands next to it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/bench-go-server}" && cd "${1:-$root/build/bench-go-server}" && pwd)
source "$root/bench/lib/go_offline.sh"
go_offline_gopath "$root" "$out" "github.com/fullsailor/pkcs7:golang-github-fullsailor-pkcs7-dev"
mkdir -p "$gopath/src/grpcgo-server" "$gopath/src/benchclient"
cp "$here/main.go" "$gopath/src/grpcgo-server/"
cp "$here/benchclient/main.go" "$gopath/src/benchclient/"
# Default `go build` flags.
(cd "$gopath/src/grpcgo-server" && go build -o "$out/grpcgo-server" .)
# The bench's helper: real calls to validate grpc-status, and idle connections for RSS.
(cd "$gopath/src/benchclient" && go build -o "$out/benchclient" .)
echo "$out/grpcgo-server"
