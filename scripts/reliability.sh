#!/usr/bin/env bash
# The full reliability suite (issue 5, docs/RELIABILITY.md), from one command. CI runs the
# short forms through scripts/test.sh (and the fuzz targets' seeds as tests, no timed fuzzing);
# this runs every part in full, in order:
#   1. faults   the fault matrix and the service's bad-input test (LP_BAD_TOKENS=20000 garbage
#               tokens) under ASan+UBSan, then the TSan run (scripts/test.sh with its soak and
#               image left out: they are parts 3 and 5)
#   2. crash    crash consistency in full (CRASH_FULL=1: 1,000 random SIGKILLs, strace SIGKILL
#               and EIO at every call after main())
#   3. soak     bench/soak.sh: SOAK_SECONDS (180) of h2load through HAProxy while the store
#               reloads and thousands of idle and slowloris connections are held (release build)
#   4. fuzz     scripts/fuzz.sh: every libFuzzer target for FUZZ_SECONDS (300) each
#   5. image    the container image with both binaries compiled from source in a Debian 12
#               container (deploy/container/build-image.sh --from-source; CI builds it from
#               build/release's), then tests/container/image_test.sh
#   6. load     the whole ASan+UBSan suite LOAD_ROUNDS (3) times while stress-ng keeps every
#               core, the disk and memory busy; lists each test that failed in any round. A
#               test whose verdict changes under load asserts which of two racing outcomes won.
#
#   scripts/reliability.sh                 all six (about 70 minutes on 2 cores)
#   scripts/reliability.sh crash fuzz      only those parts
#   CRASH_SEED=S scripts/reliability.sh crash   replays the crash run's random kills
# Each part's output is kept in build/reliability/<part>.log; the script stops at the first
# part that fails and prints the time each took.
set -euo pipefail
cd "$(dirname "$0")/.."

parts=("$@")
((${#parts[@]})) || parts=(faults crash soak fuzz image load)
for p in "${parts[@]}"; do
  case $p in
    faults | crash | soak | fuzz | image | load) ;;
    *)
      echo "reliability: unknown part '$p' (faults, crash, soak, fuzz, image, load)" >&2
      exit 2
      ;;
  esac
done

scripts/install-deps.sh --bench
out=build/reliability
mkdir -p "$out"
build=${BUILD_DIR:-build/test}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

faults() {
  LP_BAD_TOKENS=${LP_BAD_TOKENS:-20000} SKIP_SOAK=1 SKIP_IMAGE=1 BUILD_DIR=$build \
    scripts/test.sh -R 'FaultMatrix|ServiceBadInput'
}

source scripts/lib/asan_build.sh

crash() {
  asan_build "$build" crash_consistency_test hotfix-agent
  CRASH_FULL=1 LP_BIN_DIR="$PWD/$build/bin" LP_SOURCE_DIR="$PWD" \
    "$build/tests/crash_consistency_test"
  echo "figures: grep '\[crash\]' $out/crash.log"
}

soak() { SOAK_SECONDS=${SOAK_SECONDS:-180} bench/soak.sh; }

fuzz() { scripts/fuzz.sh; }

# The image test's node side (hotfix-agent, imds-standin) from the test build.
image() {
  asan_build "$build" hotfix-agent imds-standin
  deploy/container/build-image.sh --from-source
  BIN_DIR=$build/bin tests/container/image_test.sh
}

load() {
  asan_build "$build"
  # As many CPU hogs as cores at the tests' own priority, so every test runs at about half
  # speed and is preempted anywhere; plus fsync-heavy I/O and memory churn. Stopped however
  # this part ends (an interrupt included).
  stress-ng --cpu "$(nproc)" --io 1 --vm 1 --vm-bytes 10% --quiet &
  local stress=$! rounds=${LOAD_ROUNDS:-3} r
  trap "kill $stress 2>/dev/null || true" EXIT
  : >"$out/load-failed.txt"
  for ((r = 1; r <= rounds; r++)); do
    echo "load: round $r of $rounds, load average $(cut -d' ' -f1 /proc/loadavg)"
    rm -f "$build/Testing/Temporary/LastTestsFailed.log"
    ctest --test-dir "$build" -j"$(nproc)" --timeout 300 --output-on-failure || true
    if [[ -f $build/Testing/Temporary/LastTestsFailed.log ]]; then
      sed "s/^[0-9]*:/round $r: /" "$build/Testing/Temporary/LastTestsFailed.log" \
        >>"$out/load-failed.txt"
    fi
  done
  kill "$stress"
  wait "$stress" || true
  if [[ -s $out/load-failed.txt ]]; then
    echo "load: tests that failed under load ($out/load-failed.txt):"
    cat "$out/load-failed.txt"
    return 1
  fi
  echo "load: every test passed in all $rounds rounds"
}

declare -A took
for p in "${parts[@]}"; do
  echo "reliability: $p (log: $out/$p.log)"
  start=$(date +%s)
  rc=0
  "$p" > >(tee "$out/$p.log") 2>&1 || rc=$?
  took[$p]=$(($(date +%s) - start))
  if ((rc != 0)); then
    echo "reliability: $p FAILED (exit $rc) after ${took[$p]} s; see $out/$p.log" >&2
    exit "$rc"
  fi
done
for p in "${parts[@]}"; do echo "reliability: $p passed in ${took[$p]} s"; done
