#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz) from its seed corpus and prints what each reached.
# scripts/reliability.sh's fuzz part runs it in full; CI replays only the seeds, as tests of
# its ASan build (label fuzz, tests/fuzz/CMakeLists.txt).
#   scripts/fuzz.sh [--short] [--update-corpus] [target ...]
#     --short          a quick look: each target FUZZ_SECONDS=20 (default 300 without it)
#     --update-corpus  merge inputs that add coverage back into tests/fuzz/corpus/<target>
#                      (never done otherwise: runs work on a copy)
#     target ...       only these (hotfix_pointer, grpc_response, ...); default all
#   FUZZ_SECONDS=N     seconds per target;  FUZZ_JOBS=N  targets run at once (default nproc)
# Builds with clang in build/fuzz (-DHOTFIX_FUZZ=ON). Fails on any crash, leak, timeout or
# out-of-memory; the input that did it is kept and the command to reproduce it printed.
set -euo pipefail
cd "$(dirname "$0")/.."

short=0
update=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --short) short=1 ;;
    --update-corpus) update=1 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag $arg" >&2; exit 2 ;;
    *) targets+=("$arg") ;;
  esac
done
if ((short)); then seconds=${FUZZ_SECONDS:-20}; else seconds=${FUZZ_SECONDS:-300}; fi
jobs=${FUZZ_JOBS:-$(nproc)}

build=build/fuzz
src=tests/fuzz
# -O1: libFuzzer's usual trade between executions per second and compile time.
if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1 -DHOTFIX_FUZZ=ON -DHOTFIX_WERROR=ON >/dev/null
fi
nice -n 10 ninja -C "$build" fuzz >/dev/null

if ((${#targets[@]} == 0)); then
  for f in "$src"/*_fuzz.cc; do
    n=$(basename "$f" _fuzz.cc)
    targets+=("$n")
  done
fi

# The dictionary that helps each target, if any.
dict_for() {
  case "$1" in
    hotfix_pointer | node_config | service_call | prometheus_answer | outcome_report)
      echo "$src/json.dict" ;;
    imds_response) echo "$src/http.dict" ;;
    grpc_response | h2_server_session) echo "$src/http2.dict" ;;
    attested_document) echo "$src/pkcs7.dict" ;;
    node_custom_data) echo "$src/yaml.dict" ;;
    apt_source | release_file | packages_index | yum_repo) echo "$src/repository.dict" ;;
    repo_metadata_xml) echo "$src/xml.dict" ;;
  esac
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# One target: a fresh copy of its seeds, then libFuzzer for $seconds. Writes run/<t>/log.
run_one() {
  local t=$1 dir=$build/run/$1
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$src/corpus/$t"/* "$dir/corpus/"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536
              -print_final_stats=1 -artifact_prefix="$dir/artifacts/")
  local dict
  dict=$(dict_for "$t")
  [[ -n $dict ]] && args+=(-dict="$dict")
  local rc=0
  "$build/fuzz/${t}_fuzz" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
}

start=$(date +%s)
echo "fuzzing ${#targets[@]} targets, ${seconds}s each, $jobs at a time"
running=0
for t in "${targets[@]}"; do
  [[ -x $build/fuzz/${t}_fuzz ]] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
  run_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=0
printf '\n%-18s %6s %12s %9s %7s %8s %8s %s\n' target result execs exec/s cov ft corpus new
for t in "${targets[@]}"; do
  dir=$build/run/$t
  log=$dir/log
  rc=$(cat "$dir/rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  new=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
  # The last status line carries the final coverage: "#N DONE cov: C ft: F corp: ...".
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corpus=$(find "$dir/corpus" -type f | wc -l)
  result=ok
  if [[ $rc != 0 ]]; then
    result=FAIL
    failed=1
  fi
  printf '%-18s %6s %12s %9s %7s %8s %8s %s\n' "$t" "$result" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "$corpus" "${new:-?}"
done

for t in "${targets[@]}"; do
  dir=$build/run/$t
  [[ $(cat "$dir/rc") == 0 ]] && continue
  echo
  echo "=== $t FAILED (exit $(cat "$dir/rc")); the end of $dir/log:"
  tail -n 60 "$dir/log"
  for a in "$dir"/artifacts/*; do
    [[ -e $a ]] || continue
    keep=$build/crashes/$t
    mkdir -p "$keep"
    cp "$a" "$keep/"
    echo "kept $keep/$(basename "$a"); reproduce with:"
    echo "  $build/fuzz/${t}_fuzz $keep/$(basename "$a")"
  done
done

if ((update)); then
  for t in "${targets[@]}"; do
    # Only inputs that add coverage to what the repo holds.
    "$build/fuzz/${t}_fuzz" -merge=1 -max_len=65536 "$src/corpus/$t" "$build/run/$t/corpus" \
      >"$build/run/$t/merge.log" 2>&1
    echo "corpus/$t: $(find "$src/corpus/$t" -type f | wc -l) files"
  done
fi

echo "fuzzing took $(($(date +%s) - start))s"
exit "$failed"
