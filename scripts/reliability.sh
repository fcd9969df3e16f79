#!/usr/bin/env bash
# The full reliability suite (issue 5), from one command; CI runs the short forms through
# scripts/test.sh (ctest -L integration) and scripts/fuzz.sh --short.
#   scripts/reliability.sh            crash consistency in full (CRASH_FULL=1: 1,000 random
#                                     SIGKILLs, strace at every call), then scripts/fuzz.sh
#   CRASH_SEED=S scripts/reliability.sh   replays the crash run's random kills
#   SKIP_FUZZ=1                       the crash run only
# Builds the ASan+UBSan test build in $BUILD_DIR (default build/test), as scripts/test.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build=${BUILD_DIR:-build/test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DHOTFIX_SANITIZE=ON -DHOTFIX_WERROR=ON -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
ninja -C "$build" -j"$(nproc)" crash_consistency_test
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

start=$(date +%s)
CRASH_FULL=1 LP_BIN_DIR="$PWD/$build/bin" LP_SOURCE_DIR="$PWD" \
  "$build/tests/crash_consistency_test" 2>&1 | tee "$build/crash-full.log"
echo "reliability: crash consistency in full took $(($(date +%s) - start)) s" \
  "(figures: grep '\[crash\]' $build/crash-full.log)"

if [[ -z "${SKIP_FUZZ:-}" && -x scripts/fuzz.sh ]]; then
  scripts/fuzz.sh
fi
