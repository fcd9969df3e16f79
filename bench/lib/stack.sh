# shellcheck shell=bash
# The service stack's start-up, shared by bench/service_bench.sh, bench/node_boot_bench.sh,
# bench/rollout_bench.sh, bench/client_bench.sh and bench/soak.sh (sourced). Every function that starts a process appends its PID to `pids`,
# which the EXIT trap set here kills (with `idle_pid`, stack_idle_rss's holder, if running);
# failures go through the caller's `die`.

pids=() idle_pid=''
stack_cleanup() {
  local p
  [[ -n $idle_pid ]] && kill "$idle_pid" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stack_cleanup EXIT
trap 'exit 130' INT TERM
log() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

# One GetComponentConfig straight to the service at 127.0.0.1:PORT as FQDN (curl, HTTP/2), with
# WORK/token as the node's document and WORK/request.bin as the framed request; prints the
# grpc-status read from the trailers (h2load cannot see them) and the body's printable bytes.
#   stack_grpc_call FQDN PORT WORK
stack_grpc_call() {
  local fqdn=$1 port=$2 work=$3 body status
  body=$(curl -s --http2 --insecure --connect-to "$fqdn:443:127.0.0.1:$port" \
    -H 'content-type: application/grpc' -H 'te: trailers' \
    -H "authorization: $(<"$work/token")" --data-binary @"$work/request.bin" \
    -D "$work/call.headers" --max-time 10 \
    "https://$fqdn/akslivepatching.v1.LivePatchingService/GetComponentConfig" | tr -d '\0' |
    tr -c '[:print:]' ' ') || true
  status=$(sed -n 's/^grpc-status: *\([0-9]*\).*/\1/p' "$work/call.headers" | tail -1)
  printf '%s %s\n' "${status:-none}" "$body"
}

# Sets bin, the folder of the Release live-patching-service and imds-standin a bench runs:
# GIVEN when set (prebuilt: scripts/test.sh passes build/release/bin), else
# BUILD_ROOT/release/bin, built there first unless BENCH_NO_BUILD=1. The caller's die() ends it
# when either binary is missing.
#   stack_release_bin GIVEN BUILD_ROOT
stack_release_bin() {
  local given=$1 build_root=$2
  if [[ -n $given ]]; then
    bin=$(cd "$given" && pwd)
  else
    bin=$PWD/$build_root/release/bin
    if [[ ${BENCH_NO_BUILD:-0} != 1 ]]; then
      log "build (Release, $build_root/release)"
      cmake -S . -B "$build_root/release" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -U HOTFIX_STATIC_DEPS -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
      nice -n 10 ninja -j"${BENCH_JOBS:-2}" -C "$build_root/release" live-patching-service \
        imds-standin >/dev/null || die "build failed: ninja -C $build_root/release"
    fi
  fi
  local b
  for b in live-patching-service imds-standin; do [[ -x $bin/$b ]] || die "no $bin/$b"; done
}

# stack_wait_port PORT [LOGDIR]: until something listens on 127.0.0.1:PORT (10 s).
stack_wait_port() {
  for _ in $(seq 100); do nc -z 127.0.0.1 "$1" 2>/dev/null && return 0; sleep 0.1; done
  die "nothing listens on 127.0.0.1:$1 (see ${2:-the logs})"
}

# stack_wait_closed PORT: until the server on 127.0.0.1:PORT holds no connection but in
# TIME-WAIT (its side of every connection closed, and so counted in its CPU time; 10 s).
stack_wait_closed() {
  for _ in $(seq 200); do
    [[ -z $(ss -Htn state connected exclude time-wait "( sport = :$1 )") ]] && return 0
    sleep 0.05
  done
  die "the server on 127.0.0.1:$1 still holds connections after 10 s"
}

# stack_ports_free FIRST LAST ENVVAR: refuses to start on ports someone else holds.
stack_ports_free() {
  local p
  for p in $(seq "$1" "$2"); do
    if nc -z 127.0.0.1 "$p" 2>/dev/null; then die "port $p is in use; set $3"; fi
  done
}

# stack_raise_fds N: the open-file limit for the held connections (and what HAProxy inherits).
stack_raise_fds() {
  if (($(ulimit -n) < $1)); then
    ulimit -n "$1" 2>/dev/null || die "ulimit -n $1 refused (hard limit $(ulimit -Hn))"
  fi
}

# stack_start_imds BIN PORT ROOT_PEM LOG: the IMDS stand-in, waiting for its signer root.
stack_start_imds() {
  "$1/imds-standin" --listen "127.0.0.1:$2" --write-signer-ca "$3" >"$4" 2>&1 &
  pids+=($!)
  stack_wait_port "$2" "$4"
  for _ in $(seq 100); do [[ -s $3 ]] && break; sleep 0.1; done
}

# stack_start_apiserver PORT CERT KEY LOG: the apiserver stand-in behind the proxy's default
# route (anything that does not offer ALPN aks-live-patching).
stack_start_apiserver() {
  openssl s_server -quiet -accept "$1" -cert "$2" -key "$3" -alpn h2,http/1.1 -www >"$4" 2>&1 &
  pids+=($!)
}

# stack_start_haproxy FRONT_PORT SERVICE_PORT APISERVER_PORT LOG [send-proxy]:
# deploy/haproxy/haproxy.cfg, without its PROXY protocol header (LP_NO_PROXY_PROTOCOL): the
# grpc-go reference behind the same config cannot read one, and both servers must be measured
# alike. send-proxy: with it, as shipped (a live-patching-service run with --proxy-protocol).
stack_start_haproxy() {
  local -a env=(LP_FRONTEND_BIND="127.0.0.1:$1" LP_SERVICE_ADDR="127.0.0.1:$2"
    LP_APISERVER_ADDR="127.0.0.1:$3")
  [[ ${5:-} == send-proxy ]] || env+=(LP_NO_PROXY_PROTOCOL=1)
  env "${env[@]}" haproxy -db -f deploy/haproxy/haproxy.cfg >"$4" 2>&1 &
  pids+=($!)
}

# stack_service_binary BUILD_ROOT OUT: the live-patching-service under test: $BENCH_CXX_BIN if
# set, else a Release build in BUILD_ROOT/release (not with BENCH_NO_BUILD=1); sets bin and
# origin (what was benched, for the summary). The build's output goes to OUT/ninja.log.
stack_service_binary() {
  if [[ -n ${BENCH_CXX_BIN:-} ]]; then
    bin=$(realpath "$BENCH_CXX_BIN")
    origin="prebuilt $bin"
  else
    bin=$root/$1/release/bin/live-patching-service
    origin="$1/release"
    if [[ ${BENCH_NO_BUILD:-0} != 1 ]]; then
      log "build (Release; nice -n 10 ninja -j${BENCH_JOBS:-1})"
      cmake -S . -B "$1/release" -G Ninja -DCMAKE_BUILD_TYPE=Release -U HOTFIX_STATIC_DEPS \
        -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
      nice -n 10 ninja -j"${BENCH_JOBS:-1}" -C "$1/release" live-patching-service \
        >"$2/ninja.log" 2>&1 || die "build failed (see $2/ninja.log; BENCH_CXX_BIN runs another binary)"
    fi
  fi
  [[ -x $bin ]] || die "no $bin (BENCH_NO_BUILD=1 without a build?)"
  origin+=", binary of $(date -u -r "$bin" '+%Y-%m-%d %H:%M UTC')"  # the tree may have moved since
}

# stack_bench_tools BUILD_ROOT: the load generator and the document minter the node-boot
# benches share; sets goserver (bench/grpcgo-server), benchclient (beside it) and mint
# (bench/mint_tokens.c).
stack_bench_tools() {
  goserver=$(nice -n 10 bench/grpcgo-server/build.sh "$root/$1/bench-go-server")
  benchclient=$(dirname "$goserver")/benchclient
  mkdir -p "$1/bench-tools"
  mint=$root/$1/bench-tools/mint_tokens
  cc -O2 -Wall -Wextra -Werror -o "$mint" bench/mint_tokens.c -lcrypto || die "mint_tokens did not build"
}

# stack_fetch_token IMDS_PORT DIR: DIR/attested.json and its signature in DIR/token (the
# node's `authorization` value).
stack_fetch_token() {
  curl -sf -H 'Metadata: true' \
    "http://127.0.0.1:$1/metadata/attested/document?api-version=2025-04-07" \
    >"$2/attested.json" || die "IMDS stand-in did not answer"
  sed -n 's/.*"signature" *: *"\([^"]*\)".*/\1/p' "$2/attested.json" | tr -d '\n' >"$2/token"
  [[ -s $2/token ]] || die "no signature in $(<"$2/attested.json")"
}

# VmRSS of process PID idle, then with N idle TLS+HTTP/2 connections (`benchclient idle`:
# handshake with ALPN h2, preface and SETTINGS, no call) to 127.0.0.1:PORT, held 3 s.
#   stack_idle_rss BENCHCLIENT PID PORT N WORKDIR LABEL
# Sets idle_rss_kb, held_rss_kb and held_established (connections `ss` sees at PORT);
# idle_pid is the holder's pid while it runs (for the caller's clean-up trap).
stack_idle_rss() {
  local benchclient=$1 pid=$2 port=$3 n=$4 work=$5 label=$6
  local fifo=$work/idle-$label.fifo out=$work/idle-$label.out fd
  sleep 1
  idle_rss_kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
  mkfifo "$fifo"
  "$benchclient" idle --addr "127.0.0.1:$port" --conns "$n" <"$fifo" >"$out" 2>&1 &
  idle_pid=$!
  exec {fd}>"$fifo"
  for _ in $(seq 1200); do
    grep -q '^open' "$out" && break
    kill -0 "$idle_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "^open $n" "$out" || { cat "$out" >&2; echo "$label: could not open $n connections" >&2; return 1; }
  sleep 3
  held_rss_kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
  held_established=$(ss -Htn state established "( sport = :$port )" | wc -l)
  exec {fd}>&-
  wait "$idle_pid" 2>/dev/null || true
  idle_pid=''
  rm -f "$fifo"
}

# stack_imds_pki DIR ec|rsa: the signer of the benches' attested documents (bench/mint_tokens.c)
# and the root the services trust: DIR/signer.{pem,key} (a leaf for metadata.azure.com, CN +
# DNS SAN, EKU serverAuth+clientAuth, as tests/support/imds_standin.cc's IssueImdsSigner) and DIR/roots.pem, the
# services' --attestation-roots. ec: an ECDSA P-256 signer under an ECDSA root, as the IMDS
# stand-in makes; rsa: an RSA-2048 signer under an RSA-2048 intermediate and root, as Azure's
# IMDS (roots.pem then holds root + intermediate, as src/service/identity/node_identity.h says).
stack_imds_pki() {
  local dir=$1 kind=$2 issuer=root
  local -a key=(ec -pkeyopt ec_paramgen_curve:P-256)
  [[ $kind == rsa ]] && key=(rsa:2048)
  mkdir -p "$dir"
  openssl req -x509 -newkey "${key[@]}" -nodes -days 2 -subj "/CN=bench-imds-root" \
    -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign' \
    -keyout "$dir/root.key" -out "$dir/root.pem" 2>/dev/null || die "openssl: no root"
  cp "$dir/root.pem" "$dir/roots.pem"
  if [[ $kind == rsa ]]; then
    issuer=intermediate
    openssl req -newkey "${key[@]}" -nodes -subj "/CN=bench-imds-intermediate" \
      -keyout "$dir/intermediate.key" -out "$dir/intermediate.csr" 2>/dev/null &&
      openssl x509 -req -in "$dir/intermediate.csr" -CA "$dir/root.pem" -CAkey "$dir/root.key" \
        -CAcreateserial -days 2 -out "$dir/intermediate.pem" 2>/dev/null \
        -extfile <(printf 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n') ||
      die "openssl: no intermediate"
    cat "$dir/intermediate.pem" >>"$dir/roots.pem"
  fi
  openssl req -newkey "${key[@]}" -nodes -subj "/CN=metadata.azure.com" \
    -keyout "$dir/signer.key" -out "$dir/signer.csr" 2>/dev/null &&
    openssl x509 -req -in "$dir/signer.csr" -CA "$dir/$issuer.pem" -CAkey "$dir/$issuer.key" \
      -CAcreateserial -days 2 -out "$dir/signer.pem" 2>/dev/null \
      -extfile <(printf 'subjectAltName=DNS:metadata.azure.com\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n') ||
    die "openssl: no signer"
  openssl verify -CAfile "$dir/roots.pem" "$dir/signer.pem" >/dev/null ||
    die "the signer does not chain to $dir/roots.pem"
}

# stack_mint_pool MINT PKI_DIR N OUT: N distinct attested documents signed by PKI_DIR's signer
# (stack_imds_pki), one `authorization` value a line, minted on every core (the part number in
# the top bits of the vmId's first group, so parts never collide); checks count and uniqueness.
stack_mint_pool() {
  local mint=$1 pki=$2 n=$3 out=$4 parts k
  parts=$(nproc)
  ((parts >= 1)) || parts=1
  for ((k = 0; k < parts; k++)); do
    "$mint" "$pki/signer.pem" "$pki/signer.key" $((n / parts + (k < n % parts ? 1 : 0))) \
      $(((k << 24) | (RANDOM << 8))) >"$out.part$k" 2>"$out.mint$k.log" &
  done
  for ((k = 0; k < parts; k++)); do wait -n || die "mint_tokens failed: $(cat "$out".mint*.log)"; done
  cat "$out".part* >"$out" && rm -f "$out".part*
  cat "$out".mint*.log >&2 && rm -f "$out".mint*.log
  (($(wc -l <"$out") == n)) || die "the pool has $(wc -l <"$out") documents, not $n"
  (($(sort -u "$out" | wc -l) == n)) || die "the pool holds duplicate documents"
}
