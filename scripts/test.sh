#!/usr/bin/env bash
# The test command: installs what it needs, builds with ASan+UBSan and -Werror, runs every
# test (unit and integration: real libgrpc++ server, real HAProxy, real certificates) in CTest.
#   scripts/test.sh [extra ctest args, e.g. -L unit or -R Nbc]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build=${BUILD_DIR:-build/test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DHOTFIX_SANITIZE=ON -DHOTFIX_WERROR=ON -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
ninja -C "$build" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 300 "$@"
