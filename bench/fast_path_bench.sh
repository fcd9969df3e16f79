#!/usr/bin/env bash
# download-hotfix's repository fast path (AgentBaker #9451; docs/DOWNLOAD-HOTFIX.md) against
# what apt does for the same package, on a package the size of the real one, from the same
# loopback repository: a REAL signed apt repository (tests/support/make-signed-repo.sh: gpg,
# dpkg-deb, apt-ftparchive) served by nginx on 127.0.0.1.
#
#   bench/fast_path_bench.sh [--rounds N] [--warmup N] [--size-mib M] [--large-mib L]
#                            [--binary-mib B] [--profile N]
#
#   --rounds N      measured rounds (default 10); each round runs every row once, in the order
#                   A B C D E, then E D C B A, ... (so load from other jobs falls on every row
#                   alike)
#   --warmup N      unrecorded rounds first (default 1): page cache, nginx, apt's caches
#   --size-mib M    rows A-C's package (default 40; at most 128): usr/bin/aks-node-controller
#                   is M MiB of random bytes (the real package is nearly all its binary, so the
#                   member the fast path extracts is the bulk of the package, as on a node)
#   --binary-mib B  row D's binary (default 120; at most 128, the reference's cap on the
#                   extracted binary: a larger member is an integrity failure)
#   --large-mib L   row E's package (default 200; at most 500, under the 512 MiB package cap)
#                   D and E are left out when either is 0
#   --profile N     after the rounds, N more runs of row A (not in the samples) under
#                   `perf trace` (execve, exit, fsync, rename, kill only: a few events per
#                   run), whose timestamps split the run into its phases (default 5; 0: none;
#                   skipped without perf). Medians in the summary, the traces in
#                   bench/out/fast-path/profile-*.txt
#   Port (env): BENCH_FAST_PATH_PORT=18796 (nginx)
#   BENCH_JOBS=2 (ninja -j), BUILD_ROOT=build: hotfix-agent is a Release build in
#   $BUILD_ROOT/bench (as bench/client_bench.sh builds it); BENCH_NO_BUILD=1: the one there.
#
# Rows, each a whole process (B two, C three: summed), wall time from spawn to reaped exit and peak RSS
# (wait4's ru_maxrss: the largest process of the tree, since each program reaps its children:
# hotfix-agent with gpgv and dpkg-deb, apt-get with its http/gpgv/store methods), measured by
# bench/benchutil.c:
#   A  fast path: `hotfix-agent download-hotfix --no-report` on a scratch Ubuntu 22.04 node
#      whose microsoft-prod.list names the repository (signed-by its key). InRelease (gpgv),
#      Packages.gz (size + SHA-256), the .deb (size + SHA-256, downloaded while the metadata is
#      checked), usr/bin/aks-node-controller streamed out of `dpkg-deb --fsys-tarfile`, staged
#      beside the VHD binary. apt-get and dpkg on its PATH are stand-ins that fail and leave a
#      mark: a run that fell back to them is an error, never a sample.
#   B  apt pair: `apt-get download aks-node-controller=<version>` then `dpkg-deb -x` of that
#      .deb, with lists an `apt-get update` fetched once before the rounds (apt checks the .deb
#      against them as it downloads).
#   C  the fair reference: `apt-get update` (lists deleted first, so InRelease and Packages
#      are fetched and verified again, as the fast path does every time) + B.
#   D  A with a B MiB binary (--binary-mib): does the fast path's peak RSS follow the size?
#   E  A with an L MiB package (--large-mib) that holds a 1 MiB binary and L-1 MiB of other files
#      (make-signed-repo.sh --size-mib): the download, the checks and the extraction's stream
#      alone, without a large binary to stage.
# apt runs with an ISOLATED configuration (APT_CONFIG): its own sources.list (signed-by the
# test key), Dir::Etc::sourceparts=-, Dir::Etc::parts and preferences of its own (nothing
# of /etc/apt is read), Dir::State, the status file and Dir::Cache in the work folder, the
# _apt sandbox user as apt has it by default (the download folder chowned to _apt, as
# scripts/install-deps.sh does); the machine's apt configuration, lists and caches are not
# used, and never written.
# Every sample is checked: exit 0, and the extracted or staged binary's SHA-256 equal to the
# one built into the package; row A also its log line "downloaded ANC hotfix through
# authenticated repository fast path" and no package-manager mark.
# Goals (the summary's verdicts): A's median wall time at most B's; A's peak RSS bounded
# whatever the size (D's within 10 % of A's).
# Output: bench/out/fast-path/ (ignored by git): samples.tsv, summary.md (also on stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

rounds=10 warmup=1 size_mib=40 large_mib=200 binary_mib=120 profile=5
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --size-mib) size_mib=$2; shift 2 ;;
    --large-mib) large_mib=$2; shift 2 ;;
    --binary-mib) binary_mib=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in rounds warmup size_mib large_mib binary_mib profile; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "--${v//_/-} wants a whole number" >&2; exit 2; }
done
((rounds >= 1 && size_mib >= 1)) || { echo "--rounds and --size-mib must be at least 1" >&2; exit 2; }
((large_mib <= 500)) || { echo "--large-mib: the fast path's package cap is 512 MiB" >&2; exit 2; }
((binary_mib <= 128 && size_mib <= 128)) ||
  { echo "--binary-mib, --size-mib: the fast path's cap on the extracted binary is 128 MiB" >&2; exit 2; }
large=0
((large_mib > 0 && binary_mib > 0)) && large=1

port=${BENCH_FAST_PATH_PORT:-18796}
jobs=${BENCH_JOBS:-2}
build_root=${BUILD_ROOT:-build}
current=202604.01.0 hotfix=202604.01.3 ubuntu=22.04 suite=jammy
arch=$(dpkg --print-architecture)
package_version=$hotfix-ubuntu${ubuntu}u1
# The fast path reads HTTP(S)_PROXY as the reference does; apt reads http_proxy: neither here.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

out=$root/bench/out/fast-path
work=$out/work
rm -rf "$out" && mkdir -p "$work"

# pids, the clean-up on exit and log() come from the stack's prologue.
source bench/lib/stack.sh
die() { echo "fast_path_bench: $*" >&2; exit 1; }
stack_ports_free "$port" "$port" BENCH_FAST_PATH_PORT

# ---------------------------------------------------------------------------------------
log "build (Release, $build_root/bench; ninja -j$jobs)"
scripts/install-deps.sh --bench >&2
if [[ ${BENCH_NO_BUILD:-0} != 1 ]]; then
  cmake -S . -B "$build_root/bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -U HOTFIX_STATIC_DEPS \
    -DHOTFIX_AGENT_VERSION="$current" >/dev/null
  nice -n 5 ninja -j"$jobs" -C "$build_root/bench" hotfix-agent >"$out/ninja.log" 2>&1 ||
    die "build failed (see $out/ninja.log)"
fi
agent=$root/$build_root/bench/bin/hotfix-agent
[[ -x $agent ]] || die "no $agent (BENCH_NO_BUILD=1 without a build?)"
agent_built=$(date -u -r "$agent" '+%Y-%m-%d %H:%M UTC')
mkdir -p "$build_root/bench-tools"
benchutil=$root/$build_root/bench-tools/benchutil
cc -O2 -Wall -Wextra -o "$benchutil" bench/benchutil.c

# ---------------------------------------------------------------------------------------
# One repository per row: rN holds an N MiB binary; pN an N MiB package with a 1 MiB binary.
repos=("r$size_mib")
((large)) && repos+=("r$binary_mib" "p$large_mib")
log "signed repositories ${repos[*]}: aks-node-controller $package_version $arch (not timed)"
signed_repo=tests/support/make-signed-repo.sh
"$signed_repo" key "$work/key" >/dev/null
www=$work/www
declare -A deb_of sha_of
for repo in "${repos[@]}"; do
  mib=${repo#?} src=$work/src-$repo/aks-node-controller padding=()
  mkdir -p "${src%/*}"
  if [[ $repo == p* ]]; then
    head -c 1048576 /dev/urandom >"$src"
    padding=(--size-mib "$mib")
  else
    head -c $((mib * 1048576)) /dev/urandom >"$src"
  fi
  sha_of[$repo]=$(sha256sum "$src" | cut -d' ' -f1)
  deb_of[$repo]=$("$signed_repo" deb "$www/$repo" --key "$work/key" --version "$hotfix" \
    --ubuntu "$ubuntu" --arch "$arch" --binary "$src" "${padding[@]}")
  echo "$repo: ${deb_of[$repo]##*/}, $(stat -c %s "${deb_of[$repo]}") bytes" >&2
  rm -f "$src"
done

source "$root/scripts/lib/static_nginx.sh"
static_nginx_conf "$work/nginx" "$www" "$port"
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e stderr >"$work/nginx/nginx.log" 2>&1 &
pids+=($!)
stack_wait_port "$port" "$work/nginx/nginx.log"

# ---------------------------------------------------------------------------------------
# The fast path's scratch node for each size, and the package-manager stand-ins.
mkdir -p "$work/no-package-manager"
for pm in apt-get dpkg; do
  # shellcheck disable=SC2016  # $* and the mark's name expand when the stand-in runs
  printf '#!/bin/sh\necho "%s $*" >>"$PACKAGE_MANAGER_MARK"\nexit 100\n' "$pm" \
    >"$work/no-package-manager/$pm"
  chmod +x "$work/no-package-manager/$pm"
done
for repo in "${repos[@]}"; do
  node=$work/node-$repo
  mkdir -p "$node/etc/apt/sources.list.d" "$node/etc/apt/trusted.gpg.d" "$node/opt" \
    "$node/usr/bin" "$node/events"
  printf 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="%s"\n' "$ubuntu" >"$node/etc/os-release"
  "$signed_repo" aptsource "$node/etc/apt/sources.list.d/microsoft-prod.list" \
    --uri "http://127.0.0.1:$port/$repo" --suite "$suite" --arch "$arch" \
    --signed-by "$work/key/keyring.gpg"
  printf '#!/bin/sh\necho "aks-node-controller %s (VHD)"\n' "$current" >"$node/opt/aks-node-controller"
  chmod 0755 "$node/opt/aks-node-controller"
  printf '{"hotfixes":{"202604.01":"%s"}}' "$hotfix" >"$node/opt/aks-node-controller-hotfix.json"
done

# apt's private world, for the --size-mib repository.
apt=$work/apt
mkdir -p "$apt/etc/apt.conf.d" "$apt/etc/preferences.d" "$apt/etc/trusted.gpg.d" \
  "$apt/state/lists/partial" "$apt/cache/archives/partial" "$apt/log" "$apt/download" "$apt/x"
: >"$apt/etc/apt.conf"
: >"$apt/state/status"
echo "deb [arch=$arch signed-by=$work/key/keyring.gpg] http://127.0.0.1:$port/r$size_mib $suite main" \
  >"$apt/etc/sources.list"
cat >"$apt/apt.conf" <<APTCONF
Dir::Etc "$apt/etc/";
Dir::Etc::main "apt.conf";
Dir::Etc::parts "apt.conf.d";
Dir::Etc::preferences "preferences";
Dir::Etc::preferencesparts "preferences.d";
Dir::Etc::sourcelist "sources.list";
Dir::Etc::sourceparts "-";
Dir::Etc::trusted "trusted.gpg";
Dir::Etc::trustedparts "trusted.gpg.d";
Dir::State "$apt/state/";
Dir::State::status "$apt/state/status";
Dir::Cache "$apt/cache/";
Dir::Log "$apt/log/";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
APTCONF
export APT_CONFIG=$apt/apt.conf
if id _apt >/dev/null 2>&1; then chown _apt "$apt/download"; fi  # apt's sandbox user writes there
apt-get update -q >"$work/apt-update-first.log" 2>&1 ||
  { cat "$work/apt-update-first.log" >&2; die "apt-get update (isolated) failed"; }
apt-cache policy aks-node-controller >"$work/apt-policy.txt" 2>&1
grep -q "$package_version" "$work/apt-policy.txt" ||
  { cat "$work/apt-policy.txt" >&2; die "apt does not see aks-node-controller $package_version"; }

# ---------------------------------------------------------------------------------------
samples=$out/samples.tsv
printf 'round\trow\twall_us\tmaxrss_kb\tdetail\n' >"$samples"

# spawn LABEL ARGS...: one process under benchutil; sets s_wall s_rss; dies on a non-zero exit.
spawn() {
  local label=$1 line rc
  shift
  line=$("$benchutil" run --stdout "$work/$label.out" --stderr "$work/$label.err" -- "$@")
  read -r s_wall s_rss rc <<<"$line"
  if [[ $rc != 0 ]]; then
    cat "$work/$label.out" "$work/$label.err" >&2
    die "$label: $* exited $rc"
  fi
}

# fast REPO [WRAPPER...]: row A, D or E once (under WRAPPER if given: the profile's perf);
# sets r_wall r_rss r_detail (the agent's durationMs).
fast() {
  local repo=$1 node=$work/node-$1 staged
  shift
  rm -f "$node/opt/aks-node-controller-hotfix" "$node/mark" "$node"/events/*
  : >"$node/download.log"
  PATH="$work/no-package-manager:$PATH" PACKAGE_MANAGER_MARK=$node/mark \
    spawn "fast-$repo" "$@" "$agent" download-hotfix \
    --hotfix-pointer "$node/opt/aks-node-controller-hotfix.json" --current-version "$current" \
    --os-release "$node/etc/os-release" --apt-sources-dir "$node/etc/apt/sources.list.d" \
    --apt-trusted-dir "$node/etc/apt/trusted.gpg.d" --vhd-binary "$node/opt/aks-node-controller" \
    --hotfix-binary "$node/opt/aks-node-controller-hotfix" \
    --package-binary "$node/usr/bin/aks-node-controller" \
    --node-custom-data "$node/opt/nodecustomdata.yml" --events-dir "$node/events" \
    --log-file "$node/download.log" --no-report
  [[ ! -e $node/mark ]] || die "fast path ($repo) fell back to a package manager: $(cat "$node/mark")"
  grep -q '"msg":"downloaded ANC hotfix through authenticated repository fast path"' \
    "$node/download.log" || { cat "$node/download.log" >&2; die "fast path ($repo): no success line"; }
  staged=$(sha256sum "$node/opt/aks-node-controller-hotfix" | cut -d' ' -f1)
  [[ $staged == "${sha_of[$repo]}" ]] || die "fast path ($repo) staged the wrong bytes"
  r_wall=$s_wall r_rss=$s_rss
  r_detail=durationMs=$(sed -n 's/.*"msg":"downloaded ANC hotfix through authenticated repository fast path".*"durationMs":\([0-9]*\).*/\1/p' "$node/download.log")
}

# apt_pair [update]: row B (or C with "update"); sets r_wall r_rss r_detail (per step, ms).
apt_pair() {
  local w=0 r=0 detail='' got
  rm -rf "${apt:?}/download/"*.deb "${apt:?}/x"
  mkdir -p "$apt/x"
  if [[ ${1:-} == update ]]; then
    rm -rf "${apt:?}"/state/lists/* "${apt:?}"/cache/*.bin
    mkdir -p "$apt/state/lists/partial"
    spawn apt-update /usr/bin/apt-get update -q
    w=$((w + s_wall)) r=$((s_rss > r ? s_rss : r)) detail+="update=$((s_wall / 1000)) "
  fi
  cd "$apt/download"  # apt-get download writes to the current folder
  spawn apt-download /usr/bin/apt-get download -q "aks-node-controller=$package_version"
  cd "$root"
  w=$((w + s_wall)) r=$((s_rss > r ? s_rss : r)) detail+="download=$((s_wall / 1000)) "
  spawn dpkg-deb-x /usr/bin/dpkg-deb -x "$apt/download/aks-node-controller_${package_version}_$arch.deb" "$apt/x"
  w=$((w + s_wall)) r=$((s_rss > r ? s_rss : r)) detail+="extract=$((s_wall / 1000))"
  got=$(sha256sum "$apt/x/usr/bin/aks-node-controller" | cut -d' ' -f1)
  [[ $got == "${sha_of[r$size_mib]}" ]] || die "apt pair extracted the wrong bytes"
  r_wall=$w r_rss=$r r_detail=$detail
}

declare -A label_of=([A]="fast path, $size_mib MiB" [B]="apt-get download + dpkg-deb -x"
  [C]="apt-get update + download + dpkg-deb -x" [D]="fast path, $binary_mib MiB binary"
  [E]="fast path, $large_mib MiB package, 1 MiB binary")
rows=(A B C)
((large)) && rows+=(D E)
run_row() {  # ROW ROUND [record]
  case $1 in
    A) fast "r$size_mib" ;;
    B) apt_pair ;;
    C) apt_pair update ;;
    D) fast "r$binary_mib" ;;
    E) fast "p$large_mib" ;;
  esac
  [[ -n ${3:-} ]] && printf '%s\t%s\t%s\t%s\t%s\n' "$2" "$1" "$r_wall" "$r_rss" "$r_detail" >>"$samples"
  return 0
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
log "$warmup warm-up round(s), then $rounds measured: ${rows[*]}, then reversed, ..."
for ((k = 0; k < warmup + rounds; k++)); do
  order=("${rows[@]}")
  if ((k % 2)); then order=(); for ((i = ${#rows[@]} - 1; i >= 0; i--)); do order+=("${rows[i]}"); done; fi
  record=''
  ((k >= warmup)) && record=record
  for row in "${order[@]}"; do run_row "$row" $((k - warmup + 1)) $record; done
  ((k >= warmup)) && printf '  round %d/%d done\n' $((k - warmup + 1)) "$rounds" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The profile: where row A's time goes, from the timestamps (ms since the agent's exec) of
# the few system calls that bound its phases. The package downloads on a thread of its own
# while the main thread runs gpgv and reads Packages; the main thread then waits for it,
# compares the digests, runs dpkg-deb, kills it once the binary is copied out, ends the
# fast path (joining its cancellation thread) and stages the binary (fsync, rename).
profiled=0
if ((profile > 0)) && ! command -v perf >/dev/null; then
  echo "no perf: no profile" >&2
elif ((profile > 0)); then
  log "profile: $profile runs of row A under perf trace"
  for ((k = 1; k <= profile; k++)); do
    fast "r$size_mib" perf trace -e execve,exit,exit_group,fsync,rename,kill \
      -o "$out/profile-$k.txt" --
    # perf trace names a thread by its comm when the event is read, so a child may still show
    # the agent's name (or none): the children are told apart by order and thread id. The
    # first execve is gpgv (the source's keyring is binary: no gpg --dearmor before it), the
    # last dpkg-deb; threads end with exit, processes with exit_group.
    awk -v run="$k" '
      $1 !~ /^[0-9.]+$/ { next }
      {
        t = $1 + 0; dur = 0
        if (match($0, /\( *[0-9.]+ ms\)/)) dur = substr($0, RSTART + 1, RLENGTH - 5) + 0
        for (i = 2; i <= NF; i++) if ($i ~ /^[^(]+\/[0-9]+$/) break
        split($i, who, "/"); comm = who[1]; tid = who[2]; call = $(i + 1); sub(/\(.*/, "", call)
      }
      call == "execve" && !gs { gs = t; gtid = tid; next }
      call == "execve" { ds = t; dtid = tid; dl = last_exit; next }
      call == "exit_group" && tid == gtid { ge = t }
      call == "exit_group" && ds && tid == dtid && !kd { kd = t }
      call == "exit" && !ds { last_exit = t }
      call == "kill" && ds && !kd { kd = t }
      call == "exit" && kd && !rj { rj = t }
      call == "fsync" && rj && !fset { fs = dur; fset = 1 }
      call == "rename" && rj && !st { st = t + dur }
      call == "exit_group" { end = t }
      END {
        printf "%s\tgpgv=%.1f download_done=%.1f wait_after_download=%.1f extract=%.1f", run, ge - gs, dl, ds - dl, kd - ds
        printf " cancel_thread_join=%.1f stage=%.1f stage_fsync=%.1f after_stage=%.1f total=%.1f\n", rj - kd, st - rj, fs, end - st, end
      }' "$out/profile-$k.txt" >>"$out/profile.tsv"
  done
  profiled=1
fi
cp "$work/nginx/access.log" "$out/nginx-access.log"

# ---------------------------------------------------------------------------------------
# median/p90/min over one row's column K (divided by DIV).
stats() {  # ROW K DIV -> "median p90 min"
  awk -F'\t' -v r="$1" -v k="$2" 'NR > 1 && $2 == r { print $k }' "$samples" | sort -g |
    awk -v d="$3" '{ v[NR] = $1 / d } END {
      med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      p = int(0.9 * NR); if (p < 0.9 * NR) p++; if (p < 1) p = 1
      printf "%.1f %.1f %.1f\n", med, v[p], v[1] }'
}
median_of() { read -r m _ < <(stats "$1" "$2" "$3"); echo "$m"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# The apt rows' steps, and the fast path's own durationMs, as medians.
step_median() {  # ROW NAME
  awk -F'\t' -v r="$1" -v n="$2" 'NR > 1 && $2 == r {
      for (i = split($5, f, " "); i > 0; i--) { split(f[i], kv, "="); if (kv[1] == n) print kv[2] } }' \
    "$samples" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

a_wall=$(median_of A 3 1000) b_wall=$(median_of B 3 1000) c_wall=$(median_of C 3 1000)
a_rss=$(median_of A 4 1024) b_rss=$(median_of B 4 1024) c_rss=$(median_of C 4 1024)
verdict=met
awk -v a="$a_wall" -v b="$b_wall" 'BEGIN { exit !(a > b) }' && verdict='NOT met'
summary=$out/summary.md
{
  echo "# fast_path_bench $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "hotfix-agent: $build_root/bench (Release), binary of $agent_built; tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')$( [[ -n $(git status --porcelain 2>/dev/null | head -1) ]] && echo ' + uncommitted changes')"
  echo "package: aks-node-controller $package_version $arch, ${size_mib} MiB binary (random bytes), $(stat -c %s "${deb_of[r$size_mib]}") bytes .deb (gzip data)"
  echo "rounds: $rounds measured after $warmup warm-up, interleaved; started $started; loadavg $load_before at the start, $load_after at the end"
  echo
  echo "| row | n | wall median ms | p90 | min | peak RSS median MB | p90 | steps (median ms) |"
  echo "|---|---|---|---|---|---|---|---|"
  for row in "${rows[@]}"; do
    read -r wm wp wn < <(stats "$row" 3 1000)
    read -r rm rp _ < <(stats "$row" 4 1024)
    n=$(awk -F'\t' -v r="$row" 'NR > 1 && $2 == r' "$samples" | wc -l)
    case $row in
      A|D|E) steps="agent's durationMs $(step_median "$row" durationMs)" ;;
      B) steps="download $(step_median B download), extract $(step_median B extract)" ;;
      C) steps="update $(step_median C update), download $(step_median C download), extract $(step_median C extract)" ;;
    esac
    echo "| $row: ${label_of[$row]} | $n | $wm | $wp | $wn | $rm | $rp | $steps |"
  done
  echo
  echo "**goal (fast path wall <= 1.0x apt-get download + dpkg-deb -x): $verdict** —" \
    "A / B wall $(ratio "$a_wall" "$b_wall"), peak RSS $(ratio "$a_rss" "$b_rss");" \
    "A / C wall $(ratio "$a_wall" "$c_wall"), peak RSS $(ratio "$a_rss" "$c_rss")"
  if ((large)); then
    d_rss=$(median_of D 4 1024) d_wall=$(median_of D 3 1000) e_rss=$(median_of E 4 1024)
    echo
    echo "fast path peak RSS: ${a_rss} MB with a ${size_mib} MiB binary, ${d_rss} MB with a ${binary_mib} MiB" \
      "binary (x$(ratio "$d_rss" "$a_rss") for x$(ratio "$binary_mib" "$size_mib") the size, wall x$(ratio "$d_wall" "$a_wall"));" \
      "${e_rss} MB with a ${large_mib} MiB package holding a 1 MiB binary"
    rss_verdict=met
    awk -v a="$a_rss" -v d="$d_rss" 'BEGIN { exit !(d > 1.1 * a) }' && rss_verdict='NOT met'
    echo
    echo "**goal (the fast path's peak RSS bounded whatever the size: row D within 10 % of row A): $rss_verdict**"
  fi
  if ((profiled)); then
    echo
    echo "where row A's time goes (median of $profile runs under perf trace, ms from the agent's exec;" \
      "the download runs beside gpgv and Packages; the rest is serial):"
    echo
    echo "| phase | ms |"
    echo "|---|---|"
    for f in gpgv download_done wait_after_download extract cancel_thread_join stage stage_fsync after_stage total; do
      m=$(awk -F'\t' -v f="$f" '{ n = split($2, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], p, "="); if (p[1] == f) print p[2] } }' \
        "$out/profile.tsv" | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.1f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
      case $f in
        gpgv) what="gpgv on InRelease (exec to exit)" ;;
        download_done) what="start to the package downloaded (HTTP, SHA-256 and write, on its own thread)" ;;
        wait_after_download) what="then digest compare, until dpkg-deb starts" ;;
        extract) what="dpkg-deb --fsys-tarfile streamed through libarchive, the binary written, dpkg-deb killed" ;;
        cancel_thread_join) what="ending the fast path: the package unlinked, its cancellation thread joined" ;;
        stage) what="staging: the binary copied beside the VHD one (64 KiB at a time), fsync, rename" ;;
        stage_fsync) what="  of which the fsync" ;;
        after_stage) what="folder fsync, the work folder removed, event, exit" ;;
        total) what="**total (to exit_group)**" ;;
      esac
      echo "| $what | $m |"
    done
  fi
  echo
  echo "machine: $(nproc) vCPU, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1);" \
    "kernel $(uname -r); work folder on $(df -T "$work" | awk 'NR == 2 { print $2 }')"
  echo "versions: apt $(dpkg-query -W -f='${Version}' apt), dpkg $(dpkg-query -W -f='${Version}' dpkg)," \
    "gpgv $(dpkg-query -W -f='${Version}' gpgv), nginx $(dpkg-query -W -f='${Version}' nginx-light 2>/dev/null || nginx -v 2>&1)," \
    "OpenSSL $(openssl version | awk '{ print $2 }')"
  echo
  echo "nginx requests, warm-up included (path: count):"
  awk '{ print $2 }' "$out/nginx-access.log" | sort | uniq -c | awk '{ printf "- `%s`: %s\n", $2, $1 }'
} >"$summary"
cat "$summary"
