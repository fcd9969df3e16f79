#!/usr/bin/env bash
# Where hotfix-agent's start-up goes, without perf or ltrace: empty programs linked against
# the same shared libraries, timed the same way as bench/client_bench.sh (spawn to exit,
# interleaved), next to `hotfix-agent --version` and `grpcgo-client --version`.
#
#   bench/startup_probe.sh [ROUNDS]      (default 100; run bench/client_bench.sh first: it
#                                         builds hotfix-agent, grpcgo-client and benchutil)
#
# Rows:
#   empty-dynamic      int main() {}: exec + ld.so + libc, the floor of any dynamic program
#   empty-static       the same, -static: the floor of a static one
#   libs-openssl       empty main, --no-as-needed against libssl and libcrypto only: what a
#                      hotfix-agent with everything else static must still load
#   libs-no-curl       empty main, --no-as-needed against libssl, libcrypto, libnghttp2,
#                      libprotobuf, libstdc++: what the transport itself costs to load
#   libs-with-curl     the same plus libcurl (IMDS client), which drags in ~25 more libraries
#   openssl-init       OPENSSL_init_ssl + SSL_CTX_new(TLS_client_method()) and nothing else:
#                      OpenSSL 3's first-context cost (also printed in-process, in ms)
#   hotfix-agent       build/bench/bin/hotfix-agent --version
#   grpcgo-client      build/bench-go/grpcgo-client --version (Go runtime + all package init)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-100}
build_root=${BUILD_ROOT:-build}
benchutil=$build_root/bench-tools/benchutil
agent=$build_root/bench/bin/hotfix-agent
gogrpc=$build_root/bench-go/grpcgo-client
for f in "$benchutil" "$agent" "$gogrpc"; do
  [[ -x $f ]] || { echo "$f missing: run bench/client_bench.sh first" >&2; exit 1; }
done

dir=$build_root/bench-tools/probe
mkdir -p "$dir"
printf 'int main(void) { return 0; }\n' >"$dir/empty.c"
cat >"$dir/openssl_init.c" <<'EOF'
#include <openssl/ssl.h>
#include <stdio.h>
#include <time.h>
int main(void) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.3f\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
  SSL_CTX_free(ctx);
  return 0;
}
EOF
cc -O2 -o "$dir/empty-dynamic" "$dir/empty.c"
cc -O2 -static -o "$dir/empty-static" "$dir/empty.c"
cc -O2 -o "$dir/libs-openssl" "$dir/empty.c" -Wl,--no-as-needed -lssl -lcrypto
c++ -O2 -x c++ -o "$dir/libs-no-curl" "$dir/empty.c" \
  -Wl,--no-as-needed -lssl -lcrypto -lnghttp2 -lprotobuf
c++ -O2 -x c++ -o "$dir/libs-with-curl" "$dir/empty.c" \
  -Wl,--no-as-needed -lssl -lcrypto -lnghttp2 -lprotobuf -lcurl
cc -O2 -o "$dir/openssl-init" "$dir/openssl_init.c" -lssl -lcrypto

declare -A bin=([empty-dynamic]=$dir/empty-dynamic [empty-static]=$dir/empty-static
                [libs-openssl]=$dir/libs-openssl [libs-no-curl]=$dir/libs-no-curl [libs-with-curl]=$dir/libs-with-curl
                [openssl-init]=$dir/openssl-init [hotfix-agent]=$agent [grpcgo-client]=$gogrpc)
order=(empty-dynamic empty-static libs-openssl libs-no-curl libs-with-curl openssl-init hotfix-agent grpcgo-client)
samples=$dir/samples.txt
: >"$samples"
for ((i = 0; i < rounds; i++)); do
  for name in "${order[@]}"; do
    args=()
    [[ $name == hotfix-agent || $name == grpcgo-client ]] && args=(--version)
    read -r wall rss rc < <("$benchutil" run --stdout "$dir/out.txt" -- "${bin[$name]}" "${args[@]}")
    [[ $rc == 0 ]] || { echo "$name exited $rc" >&2; exit 1; }
    inproc=-
    [[ $name == openssl-init ]] && inproc=$(<"$dir/out.txt")
    echo "$name $wall $rss $inproc" >>"$samples"
  done
done

echo "startup probe: $rounds interleaved rounds; $(nproc) CPUs; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %-15s | %5s | %9s | %9s | %8s | %s |\n' program libs "mean ms" "median ms" "RSS MB" "in-process ms"
printf '|---|---|---|---|---|---|\n'
for name in "${order[@]}"; do
  libs=$(ldd "${bin[$name]}" 2>/dev/null | grep -c '=>' || true)
  awk -v n="$name" '$1 == n { print $2 / 1000, $3 / 1024, $4 }' "$samples" | sort -n |
    awk -v n="$name" -v libs="$libs" '
      { w[NR] = $1; r += $2; if ($3 != "-") { p += $3; pn++ } }
      END {
        med = (NR % 2) ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2
        for (i = 1; i <= NR; i++) s += w[i]
        printf "| %-15s | %5d | %9.2f | %9.2f | %8.1f | %s |\n", n, libs, s / NR, med, r / NR,
          (pn ? sprintf("%.2f", p / pn) : "")
      }'
done
