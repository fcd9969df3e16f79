#!/usr/bin/env bash
# The full reliability suite (issue 5, docs/RELIABILITY.md), from one command. CI runs the
# short forms through scripts/test.sh; this runs every part in full, in order:
#   1. faults   the fault matrix and the service's bad-input test (LP_BAD_TOKENS=20000 garbage
#               tokens) under ASan+UBSan, then the service's tests under TSan (scripts/test.sh
#               with its soak and fuzz parts left out: they are parts 3 and 4)
#   2. crash    crash consistency in full (CRASH_FULL=1: 1,000 random SIGKILLs, strace SIGKILL
#               and EIO at every call after main())
#   3. soak     bench/soak.sh: SOAK_SECONDS (180) of h2load through HAProxy while the store
#               reloads and thousands of idle and slowloris connections are held (release build)
#   4. fuzz     scripts/fuzz.sh: every libFuzzer target for FUZZ_SECONDS (300) each
#
#   scripts/reliability.sh                 all four (about 50 minutes on 2 cores)
#   scripts/reliability.sh crash fuzz      only those parts
#   CRASH_SEED=S scripts/reliability.sh crash   replays the crash run's random kills
# Each part's output is kept in build/reliability/<part>.log; the script stops at the first
# part that fails and prints the time each took.
set -euo pipefail
cd "$(dirname "$0")/.."

parts=("$@")
((${#parts[@]})) || parts=(faults crash soak fuzz)
for p in "${parts[@]}"; do
  case $p in
    faults | crash | soak | fuzz) ;;
    *)
      echo "reliability: unknown part '$p' (faults, crash, soak, fuzz)" >&2
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
  LP_BAD_TOKENS=${LP_BAD_TOKENS:-20000} SKIP_SOAK=1 SKIP_FUZZ=1 BUILD_DIR=$build \
    scripts/test.sh -R 'FaultMatrix|ServiceBadInput'
}

crash() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DHOTFIX_SANITIZE=ON -DHOTFIX_WERROR=ON -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
  ninja -C "$build" -j"$(nproc)" crash_consistency_test hotfix-agent
  CRASH_FULL=1 LP_BIN_DIR="$PWD/$build/bin" LP_SOURCE_DIR="$PWD" \
    "$build/tests/crash_consistency_test"
  echo "figures: grep '\[crash\]' $out/crash.log"
}

soak() { SOAK_SECONDS=${SOAK_SECONDS:-180} bench/soak.sh; }

fuzz() { scripts/fuzz.sh; }

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
