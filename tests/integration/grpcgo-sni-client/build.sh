#!/usr/bin/env bash
# Builds tests/integration/grpcgo-sni-client (sniclient) offline from Debian's Go packages,
# as bench/grpcgo-client is built (bench/lib/go_offline.sh).
#   tests/integration/grpcgo-sni-client/build.sh OUT_DIR     (prints the binary's path)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
source "$root/bench/lib/go_offline.sh"
go_offline_gopath "$root" "$out"
mkdir -p "$gopath/src/sniclient"
cp "$here/main.go" "$gopath/src/sniclient/"
(cd "$gopath/src/sniclient" && go build -o "$out/sniclient" .)
echo "$out/sniclient"
