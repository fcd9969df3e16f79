#!/usr/bin/env bash
# The cost of staged rollouts (issue 11, docs/ROLLOUTS.md): the service's CPU per call and
# calls per second with N rollouts in the component file (default 64) against none, in the
# same run. Goal: evaluating the rollouts costs under 5 % of a call.
#
#   bench/rollout_bench.sh [--rounds N] [--seconds S] [--rollouts N] [--tokens N]
#                          [--parallel P] [--warm-up S] [--profile S]
#
#   --rounds N     measured rounds per server (default 6); order A,B then B,A, ...
#   --seconds S    seconds per round during which calls are started (default 12)
#   --rollouts N   rollouts in B's file (default 64; 1 to 128, the service's limit)
#   --tokens N     the pool of distinct attested documents (default 3000 per second of load
#                  per server, warm-up included); each is used once per server; a round that
#                  runs out fails (raise it)
#   --parallel P   connecting workers in the load generator (default 32)
#   --warm-up S    unrecorded load per server before the rounds (default 3); B's warm-up is
#                  also the check that B serves rollout versions
#   --profile S    after the rounds, one more (unrecorded) round of S s per server under
#                  `perf record` with call graphs: the service's per-call code after the
#                  identity check (LivePatchingServiceImpl::Lookup, where the rollouts are
#                  evaluated, and ::Report, where they are counted and logged) in us per call,
#                  B less A, with the rollout functions inside it: a second estimate of the
#                  overhead, which other load on the machine disturbs less than CPU per call
#                  does (a share of the server's own samples). Default 0: none
#   Ports (env): BENCH_ROLLOUT_PORT_BASE=18760 (uses BASE..BASE+3)
#   BENCH_JOBS=1, BUILD_ROOT=build: builds live-patching-service in $BUILD_ROOT/release
#   (Release, nice -n 10 ninja -j$BENCH_JOBS) as bench/node_boot_bench.sh does;
#   BENCH_NO_BUILD=1: the binary already there; BENCH_CXX_BIN=/path: that binary, no build.
#
# Two live-patching-service processes of the SAME binary with identical flags (identity
# verification on, a metrics listener each), each with its own components folder holding
# aksNodeController.json:
#   A  {"hotfixes":{"202604.01":"202604.01.3"}}             (no rollouts: served as read)
#   B  the same hotfixes and N rollouts, the service's worst case: every rollout's match passes
#      for every bench node (a subscriptions list of 8 that includes the documents'
#      subscription, 4 excluded others, two `clusters` patterns of which the second matches
#      the bench's :authority, no vm_ids list), node cohort, three steps with the current one
#      at 37.5 % (so every rollout needs its bucket hash: about 24 of 64 apply per node), distinct
#      names, every rollout setting 202604.01 and every other one also 202605.30 (the keys
#      overlap; later rollouts win them).
# The load is bench/node_boot_bench.sh's: `benchclient boot` (bench/grpcgo-server), every
# call a NEW TCP connection and TLS handshake with ONE GetComponentConfig whose authorization
# is a DISTINCT validly signed attested document (bench/mint_tokens.c; one vmId per document,
# so each call is a new node with its own buckets, and the identity cache always misses).
# A's calls must carry A's config exactly; B's are checked through its access log.
# Checked before measuring, on B's warm-up: its access log lines name applied rollouts and
# their `served` differs from A's config; the share of (node, rollout) pairs that applied is
# within 35-40 % (the bucket function at 37.5 %); B's GET /rollouts says every rollout is
# ramping. After the rounds: each server's access log has as many distinct vmIds as OK calls.
# Per round: the server's utime+stime (/proc/PID/stat) -> ms CPU per OK call; calls/s = OK
# calls / wall time. Result: medians of A and B, B / A, the overhead per call in us and in %
# of A's call, the per-round ratios of adjacent rounds, and A's round-to-round spread (the
# noise the overhead has to be read against). Raw output: bench/out/rollouts/ (ignored by
# git), summary also in bench/out/rollouts/summary.md. Exit status 1 when any call failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

rounds=6 seconds=12 warmup=3 parallel=32 nrollouts=64 tokens='' profile=0
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rollouts) nrollouts=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --warm-up) warmup=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in rounds seconds nrollouts parallel warmup profile; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "--$v wants a whole number" >&2; exit 2; }
done
((rounds >= 1 && seconds >= 1 && parallel >= 1 && warmup >= 1)) ||
  { echo "--rounds, --seconds, --parallel and --warm-up must be at least 1" >&2; exit 2; }
((nrollouts >= 1 && nrollouts <= 128)) || { echo "--rollouts is 1 to 128" >&2; exit 2; }
[[ -n $tokens ]] || tokens=$(((rounds * seconds + warmup + profile) * 3000))
if ! [[ $tokens =~ ^[0-9]+$ ]] || ((tokens < 100)); then echo "--tokens wants at least 100" >&2; exit 2; fi

base=${BENCH_ROLLOUT_PORT_BASE:-18760}
build_root=${BUILD_ROOT:-build}
fqdn='bench-aks-dns-12345678.hcp.eastus.azmk8s.io'
# The service's certificate is for the apiserver FQDN: nodes verify it for the host they dial
# (AgentBaker #9351; they pinned aks-security-patch.data.mcr.microsoft.com before).
lps_name=$fqdn
subscription=8d10da13-8125-4ba9-a717-bf7490507b3d  # bench/mint_tokens.c's documents
config_a='{"hotfixes":{"202604.01":"202604.01.3"}}'
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY grpc_proxy

out=$root/bench/out/rollouts
work=$out/work
rm -rf "$out" && mkdir -p "$work/etc" "$work/A/components" "$work/B/components"

# pids, the clean-up on exit, log(), the PKI and the pool come from the stack's prologue.
source bench/lib/stack.sh
die() { echo "rollout_bench: $*" >&2; exit 1; }
stack_ports_free "$base" $((base + 3)) BENCH_ROLLOUT_PORT_BASE
stack_raise_fds $((parallel * 4 + 1000))

# ---------------------------------------------------------------------------------------
stack_service_binary "$build_root" "$out"
stack_bench_tools "$build_root"

# ---------------------------------------------------------------------------------------
log "PKI, the two components folders, $tokens attested documents (not timed)"
source scripts/lib/certs.sh
make_cluster_pki "$work/etc" bench-cluster-ca "$lps_name" "$fqdn"
stack_imds_pki "$work/pki" ec
pool=$work/tokens.txt
stack_mint_pool "$mint" "$work/pki" "$tokens" "$pool"

printf '%s' "$config_a" >"$work/A/components/aksNodeController.json"
# B: the same hotfixes and N rollouts (see the header). Steps: 10 % a week ago, 37.5 % since
# yesterday, 100 % in 30 days; the service evaluates them at its clock.
at() { date -u -d "$1" +%Y-%m-%dT%H:%M:%SZ; }
s1=$(at '-7 days') s2=$(at '-1 day') s3=$(at '+30 days')
{
  printf '{"hotfixes":{"202604.01":"202604.01.3"},\n "rollouts":['
  for ((k = 0; k < nrollouts; k++)); do
    ((k == 0)) || printf ','
    hot="\"202604.01\":\"202604.01.$((k + 4))\""
    ((k % 2)) && hot+=",\"202605.30\":\"202605.30.$((k + 1))\""
    subs=''
    for ((j = 0; j < 7; j++)); do subs+=$(printf '"%08x-0000-4000-8000-%012x",' $((k * 7 + j + 1)) $((j + 1))); done
    printf '\n  {"name":"anc-202604.01.%d-ring%02d","hotfixes":{%s},' $((k + 4)) "$k" "$hot"
    printf '"match":{"subscriptions":[%s"%s"],' "$subs" "$subscription"
    printf '"exclude_subscriptions":["%08x-ffff-4000-8000-000000000001","%08x-ffff-4000-8000-000000000002","%08x-ffff-4000-8000-000000000003","%08x-ffff-4000-8000-000000000004"],' \
      "$k" "$k" "$k" "$k"
    printf '"clusters":["*.hcp.westeurope.azmk8s.io","*.hcp.eastus.azmk8s.io"],"vm_ids":[]},'
    printf '"cohort":"node","steps":[{"at":"%s","percent":10},{"at":"%s","percent":37.5},{"at":"%s","percent":100}],"halted":false}' \
      "$s1" "$s2" "$s3"
  done
  printf '\n]}\n'
} >"$work/B/components/aksNodeController.json"
(($(grep -o '"name":' "$work/B/components/aksNodeController.json" | wc -l) == nrollouts)) ||
  die "B's component file does not hold $nrollouts rollouts"

# ---------------------------------------------------------------------------------------
log "servers A (no rollouts) and B ($nrollouts rollouts): $origin, identical flags"
labels=(A B)
declare -A port_of=([A]=$base [B]=$((base + 1))) metrics_of=([A]=$((base + 2)) [B]=$((base + 3)))
declare -A pid_of
for label in "${labels[@]}"; do
  "$bin" --listen "127.0.0.1:${port_of[$label]}" \
    --tls-cert "$work/etc/lps.pem" --tls-key "$work/etc/lps.key" \
    --components-dir "$work/$label/components" --attestation-roots "$work/pki/roots.pem" \
    --metrics-listen "127.0.0.1:${metrics_of[$label]}" >"$work/$label.log" 2>&1 &
  pid_of[$label]=$!
  pids+=($!)
done
for label in "${labels[@]}"; do
  stack_wait_port "${port_of[$label]}" "$work/$label.log"
  stack_wait_port "${metrics_of[$label]}" "$work/$label.log"
done

# ---------------------------------------------------------------------------------------
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
machine() { awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }
tck=$(getconf CLK_TCK)
declare -A cursor=([A]=0 [B]=0)
samples=$out/samples.tsv
printf 'round\tserver\tok\tfailed\telapsed_s\tcalls_per_s\tserver_cpu_s\tms_cpu_per_call\tcalls_per_cpu_s\tclient_cpu_s\tmachine_idle_pct\tp50_ms\tp99_ms\n' >"$samples"
failures=0
# run_boot LABEL ROUND SECONDS [record]: one round of the node-boot load against LABEL.
run_boot() {
  local label=$1 r=$2 dur=$3 record=${4:-} f=$out/boot-$1-$2.txt cpu0 cpu1 m0 m1 rc=0 line
  local -a expect=()
  [[ $label == A ]] && expect=(--expect "$config_a")
  sleep 1  # the previous round's connections are gone
  cpu0=$(cpu_ticks "${pid_of[$label]}")
  m0=$(machine)
  "$benchclient" boot --addr "127.0.0.1:${port_of[$label]}" --tokens-file "$pool" \
    --skip "${cursor[$label]}" --parallel "$parallel" --seconds "$dur" --server-name "$fqdn" \
    "${expect[@]}" >"$f" 2>"$f.err" || rc=$?
  sleep 0.5  # the server finishes closing the last connections
  cpu1=$(cpu_ticks "${pid_of[$label]}")
  m1=$(machine)
  line=$(grep '^result ' "$f") || { cat "$f" "$f.err" >&2; die "$label round $r: benchclient boot failed (rc $rc)"; }
  get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
  local ok bad
  ok=$(get ok) bad=$(get failed)
  cursor[$label]=$((cursor[$label] + $(get tokens_used)))
  if ((bad > 0)); then
    failures=$((failures + bad))
    echo "$label round $r: $bad FAILED calls: $(grep -E '^(codes|errors) ' "$f" | tr '\n' ' ')" >&2
    head -5 "$f.err" >&2
  fi
  if (($(get exhausted))); then
    failures=$((failures + 1))
    echo "$label round $r: the document pool ran out after ${cursor[$label]} (raise --tokens)" >&2
  fi
  ((ok > 0)) || die "$label round $r: no successful call (see $f, $f.err)"
  [[ -n $record ]] || return 0
  awk -v r="$r" -v l="$label" -v ok="$ok" -v bad="$bad" -v el="$(get elapsed_s)" \
      -v cps="$(get calls_per_s)" -v c0="$cpu0" -v c1="$cpu1" -v t="$tck" \
      -v cc="$(get client_cpu_s)" -v m0="$m0" -v m1="$m1" -v p50="$(get p50_ms)" \
      -v p99="$(get p99_ms)" 'BEGIN {
        split(m0, a, " "); split(m1, b, " ")
        cpu = (c1 - c0) / t
        idle = (b[1] > a[1]) ? 100 * (b[2] - a[2]) / (b[1] - a[1]) : 0
        printf "%s\t%s\t%d\t%d\t%.3f\t%.1f\t%.2f\t%.4f\t%.1f\t%.2f\t%.1f\t%s\t%s\n",
          r, l, ok, bad, el, cps, cpu, 1000 * cpu / ok, ok / cpu, cc, idle, p50, p99
      }' >>"$samples"
  tail -1 "$samples" | awk -F'\t' '{ printf "%s round %s: %d OK, %s calls/s, %.4f ms CPU per call, client CPU %s s, machine idle %s %%\n", $2, $1, $3, $6, $8, $10, $11 }' >&2
}
# The access log's OK lines of the pool's documents.
ok_lines() { grep '"code":"OK"' "$work/$1.log" | grep '"vm_id":"[0-9a-f]*-b007-4000-8000-' || true; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "warm-up: $warmup s per server (not recorded), then the check that B evaluates rollouts"
for label in "${labels[@]}"; do run_boot "$label" warmup "$warmup"; done
# B's access log: which rollouts applied and what was served, per call.
ok_lines B | awk -v a="$config_a" '
    { n++
      s = $0; sub(/.*"rollouts":\[/, "", s); sub(/\].*/, "", s)
      k = (s == "") ? 0 : gsub(/","/, "&", s) + 1
      applied += k; if (k > 0) some++
      v = $0; sub(/.*"served":"/, "", v); sub(/","duration_us".*/, "", v); gsub(/\\"/, "\"", v)
      if (v != a) differs++ }
    END { printf "%d %d %d %d\n", n, some, applied, differs }' >"$work/check-B.txt"
read -r b_calls b_some b_applied b_differs <"$work/check-B.txt"
share=$(awk -v a="$b_applied" -v n="$b_calls" -v r="$nrollouts" 'BEGIN { printf "%.2f", (n > 0) ? 100 * a / (n * r) : 0 }')
echo "B's warm-up: $b_calls OK calls; $b_some served a rollout version ($b_differs a config other than A's);" \
     "$b_applied rollouts applied, $share % of (node, rollout) pairs (the step says 37.5 %)" >&2
((b_calls > 0 && b_some > 0 && b_differs > 0)) ||
  die "B served no rollout version (see $work/B.log): the bench would measure nothing"
awk -v s="$share" 'BEGIN { exit !(s >= 35 && s <= 40) }' ||
  die "B's rollouts applied to $share % of (node, rollout) pairs, not about 37.5 %"
curl -sf "http://127.0.0.1:${metrics_of[B]}/rollouts" >"$work/rollouts-status.json" ||
  die "B's GET /rollouts did not answer"
ramping=$(grep -o '"ramping"' "$work/rollouts-status.json" | wc -l)
((ramping == nrollouts)) || die "B's GET /rollouts shows $ramping rollouts ramping, not $nrollouts (see $work/rollouts-status.json)"
echo "e.g. $(ok_lines B | grep -v -m1 '"rollouts":\[\]' | awk '{ v = $0; sub(/.*"vm_id":"/, "", v); sub(/".*/, "", v)
    s = $0; sub(/.*"rollouts":\[/, "", s); sub(/\].*/, "", s)
    c = $0; sub(/.*"served":"/, "", c); sub(/","duration_us".*/, "", c); gsub(/\\"/, "\"", c)
    printf "vmId %s: %d rollouts applied, served %s", v, gsub(/","/, "&", s) + 1, c }')" >&2

log "$rounds rounds x $seconds s per server, $parallel connecting workers, A,B then B,A, ..."
for ((r = 1; r <= rounds; r++)); do
  order=(A B)
  ((r % 2 == 0)) && order=(B A)
  for label in "${order[@]}"; do run_boot "$label" "$r" "$seconds" record; done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# Every OK call of the pool carried its own document: as many distinct vmIds as OK lines.
declare -A distinct_of
for label in "${labels[@]}"; do
  read -r lines distinct < <(ok_lines "$label" | grep -o '"vm_id":"[^"]*"' | sort | uniq -c |
    awk '{ n += $1; d++ } END { print n + 0, d + 0 }')
  distinct_of[$label]="$distinct of $lines"
  ((lines == distinct)) ||
    { failures=$((failures + 1)); echo "$label: $lines OK calls but $distinct distinct documents" >&2; }
done
b_applied_total=$(ok_lines B | awk '{ s = $0; sub(/.*"rollouts":\[/, "", s); sub(/\].*/, "", s)
    if (s != "") n += gsub(/","/, "&", s) + 1 } END { print n + 0 }')
# Where B's extra CPU goes: inclusive shares of the rollout code in each server's profile.
if ((profile > 0)); then
  if command -v perf >/dev/null; then
    for label in "${labels[@]}"; do
      log "profile: perf record of $label for $profile s of the same load (not recorded)"
      data=$out/perf-$label.data
      # DWARF call graphs (no frame pointers in Debian's libraries); the load starts after
      # run_boot's 1 s pause, the profile covers the load only.
      (sleep 1.5 && exec perf record -F 997 --call-graph dwarf,8192 -o "$data" \
        -p "${pid_of[$label]}" -- sleep "$profile") >"$out/perf-record-$label.log" 2>&1 &
      perf_pid=$!
      run_boot "$label" profile "$profile"
      wait "$perf_pid" || echo "perf record failed (see $out/perf-record-$label.log)" >&2
      perf report -i "$data" --children --sort sym --stdio -g none \
        >"$out/perf-$label-children.txt" 2>/dev/null || true
    done
  else
    echo "perf not installed: no profile" >&2
  fi
fi
# share LABEL FUNCTION: FUNCTION's inclusive share (with what it calls) of LABEL's samples.
share_of() {
  awk -v fn="$2" '!/^#/ && $1 ~ /%$/ {
      line = $0; sub(/^ *[0-9.]+% +[0-9.]+% +\[[^]]*\] +/, "", line)
      # the function itself, not a lambda inside it (whose name starts the same)
      if (line == fn || index(line, fn "[abi:") == 1) { v = $1; sub(/%/, "", v); print v; found = 1; exit } }
    END { if (!found) print 0 }' "$out/perf-$1-children.txt" 2>/dev/null || echo 0
}

# ---------------------------------------------------------------------------------------
source bench/lib/tsv.sh  # col, median
med_a=$(col A 8 | median) med_b=$(col B 8 | median)
cps_a=$(col A 6 | median) cps_b=$(col B 6 | median)
# Adjacent rounds' ratios (A and B of one round run back to back, so slow drift cancels).
paired=$(awk -F'\t' 'NR > 1 { v[$1, $2] = $8; r[$1] = 1 } END { for (i in r) print v[i, "B"] / v[i, "A"] }' "$samples" | median)
read -r a_min a_max a_cv < <(col A 8 | awk '{ v[NR] = $1; s += $1; q += $1 * $1 }
    END { mn = mx = v[1]; for (i in v) { if (v[i] < mn) mn = v[i]; if (v[i] > mx) mx = v[i] }
          m = s / NR; sd = (NR > 1) ? sqrt((q - NR * m * m) / (NR - 1)) : 0
          printf "%s %s %.1f\n", mn, mx, 100 * sd / m }')
read -r ratio over_us over_pct spread_pct paired_pct verdict < <(awk -v a="$med_a" -v b="$med_b" \
    -v mn="$a_min" -v mx="$a_max" -v p="$paired" 'BEGIN {
      printf "%.3f %.1f %.1f %.1f %.1f %s\n", b / a, 1000 * (b - a), 100 * (b - a) / a,
        100 * (mx - mn) / a, 100 * (p - 1), (100 * (b - a) / a < 5) ? "MET" : "MISSED" }')
noise=$(awk -v o="$over_pct" -v s="$spread_pct" -v c="$a_cv" 'BEGIN {
    if (o < 0) o = -o
    if (o <= c) print "within the noise (not above one standard deviation of A\047s rounds)"
    else if (o <= s) print "inside A\047s min-max spread, above one standard deviation"
    else print "above A\047s whole min-max spread"
  }')

summary=$out/summary.md
{
  echo "# rollout_bench $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'),"\
       "kernel $(uname -r); loadavg before $load_before, after $load_after"
  dirty=$(git status --porcelain -- src cmd CMakeLists.txt | wc -l)
  echo "tree: $(git rev-parse --short HEAD)$( ((dirty)) && echo " + $dirty uncommitted files under src, cmd"); server: $origin (both)"
  echo "load: one TCP+TLS connection per call, a distinct attested document (a distinct vmId) per call," \
       "$parallel connecting workers, $rounds rounds x $seconds s per server, A,B then B,A"
  echo "A: no rollouts; B: $nrollouts rollouts, all matching every node, node cohort, at 37.5 %;" \
       "in B's warm-up $share % of (node, rollout) pairs applied, $b_some of $b_calls calls served a rollout version"
  echo
  if ((failures)); then
    echo "**RUN FAILED: $failures failed calls or checks (see bench/out/rollouts/boot-*.txt); figures below are not valid**"
    echo
  fi
  echo "**goal (rollout evaluation < 5 % of a call): $verdict: B / A = $ratio ms CPU per call, overhead $over_us us per call = $over_pct % of A's call**"
  echo
  echo "noise: A's rounds $a_min to $a_max ms CPU per call (spread $spread_pct % of A's median, coefficient of variation $a_cv %);" \
       "the overhead is $noise; median of the rounds' own B / A ratios: $paired_pct %"
  echo
  echo "## per round"
  echo
  echo "| round | server | OK calls | failed | calls/s | server CPU s | ms CPU per call | calls per CPU-s | client CPU s | machine idle % | p50 ms | p99 ms |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  tail -n +2 "$samples" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $6, $7, $8, $9, $10, $11, $12, $13 }'
  echo
  echo "## medians over rounds"
  echo
  echo "| server | ms CPU per call | calls/s | rollouts applied per OK call (whole run) | distinct documents / OK calls (whole run) |"
  echo "|---|---|---|---|---|"
  echo "| A (no rollouts) | $med_a | $cps_a | 0 | ${distinct_of[A]} |"
  echo "| B ($nrollouts rollouts) | $med_b | $cps_b | $(awk -v a="$b_applied_total" -v s="${distinct_of[B]}" 'BEGIN { split(s, x, " "); printf "%.1f", (x[3] > 0) ? a / x[3] : 0 }') | ${distinct_of[B]} |"
  awk -v a="$med_a" -v b="$med_b" -v c="$cps_a" -v d="$cps_b" -v o="$over_us" \
    'BEGIN { printf "| **B / A** | **%.3f** (+%.1f us) | %.3f | | |\n", b / a, o, d / c }'
  if [[ -s $out/perf-B-children.txt && -s $out/perf-A-children.txt ]]; then
    ns=hotfix::service
    echo
    echo "## where B's extra CPU goes (perf, $profile s of the same load per server)"
    echo
    echo "| function (inclusive: with what it calls) | B: share of CPU | B: us per call | A: share of CPU | A: us per call |"
    echo "|---|---|---|---|---|"
    for row in "\`Lookup\`: the component and the node's answer|$ns::LivePatchingServiceImpl::Lookup" \
               "\`Report\`: metrics, rollout counters, the access-log line|$ns::LivePatchingServiceImpl::Report" \
               "in Lookup, \`ComponentConfig::ServedTo\` (B only)|$ns::ComponentConfig::ServedTo" \
               "in ServedTo, \`AnswerFor\`: match, threshold, bucket, overlay|$ns::AnswerFor" \
               "in AnswerFor, \`RolloutBucket\`: a SHA-256 per matching rollout|$ns::RolloutBucket" \
               "in AnswerFor, \`CheckMatch\`: subscriptions, clusters, vm_ids|$ns::(anonymous namespace)::CheckMatch" \
               "\`ServedHotfixesJson\`: the served JSON (A: for the log)|$ns::ServedHotfixesJson" \
               "in Report, \`RolloutStatus::RecordApplied\`: per applied rollout|$ns::RolloutStatus::RecordApplied"; do
      awk -v n="${row%%|*}" -v b="$(share_of B "${row##*|}")" -v a="$(share_of A "${row##*|}")" \
          -v mb="$med_b" -v ma="$med_a" \
        'BEGIN { printf "| %s | %.2f %% | %.1f | %.2f %% | %.1f |\n", n, b, 10 * b * mb, a, 10 * a * ma }'
    done
    # The service's per-call code after the identity check: Lookup and Report, B less A.
    awk -v bl="$(share_of B $ns::LivePatchingServiceImpl::Lookup)" \
        -v br="$(share_of B $ns::LivePatchingServiceImpl::Report)" \
        -v al="$(share_of A $ns::LivePatchingServiceImpl::Lookup)" \
        -v ar="$(share_of A $ns::LivePatchingServiceImpl::Report)" -v mb="$med_b" -v ma="$med_a" \
        -v nb="$(sed -n 's/.*(\([0-9]*\) samples).*/\1/p' "$out/perf-record-B.log")" 'BEGIN {
        us = 10 * (bl + br) * mb - 10 * (al + ar) * ma
        printf "\n**profile estimate of the overhead: %.1f us per call = %.1f %% of A\047s call** (Lookup + Report: %.1f %% of B\047s CPU at %.4f ms per call less %.1f %% of A\047s at %.4f; %s samples of B, so about +-%.1f points); the longer access-log line\047s write(2) is not in it\n",
          us, 100 * us / (1000 * ma), bl + br, mb, al + ar, ma, nb,
          (nb > 0) ? 100 * sqrt((bl + br) / 100 * (1 - (bl + br) / 100) / nb) : 0 }'
  fi
} >"$summary"
cat "$summary"
echo >&2
echo "raw samples: $samples; load generator output: $out/boot-*.txt; logs: $work/; summary: $summary" >&2
((failures == 0)) || exit 1
