#!/usr/bin/env bash
# The test command: installs what it needs, checks the formatting, builds with ASan+UBSan and
# -Werror, runs every test (unit and integration: the service under libgrpc++ and grpc-go
# clients and attack, real HAProxy and nginx, real certificates) in CTest;
# then the service's tests again under ThreadSanitizer, the soak's short form (the service
# under load through HAProxy while its store reloads and hundreds of idle and slow connections
# are held), and every fuzz target briefly (docs/RELIABILITY.md).
#   scripts/test.sh [extra ctest args, e.g. -L node or -R Nbc]   (they apply to the first run)
#   SKIP_TSAN=1 / SKIP_SOAK=1 / SKIP_FUZZ=1 leave out the second, third and fourth parts;
#   SKIP_IMAGE=1 the container image's build and test (between the soak and the fuzzing).
set -euo pipefail
cd "$(dirname "$0")/.."

# Where CI's minutes go: each part's wall time and the CPU time of what it ran (its children's
# user+sys, from /proc/self/stat), printed at the end however the script ends.
parts=()
part_name='' part_wall=0 part_cpu=0
cpu_ticks() { local s; read -r s </proc/$$/stat; s=${s##*) }; set -- $s; echo $((${14} + ${15})); }
part() {  # NAME: the running part ends, NAME begins ('' only ends it)
  local now=$SECONDS cpu
  cpu=$(cpu_ticks)
  if [[ -n $part_name ]]; then
    parts+=("$(printf '%-10s %5d s wall %6d s CPU' "$part_name" $((now - part_wall)) \
      $(((cpu - part_cpu) / $(getconf CLK_TCK))))")
  fi
  part_name=$1 part_wall=$now part_cpu=$cpu
}
trap 'part ""; printf "test.sh: %s\n" "${parts[@]}" "total      $SECONDS s"' EXIT

part deps
scripts/install-deps.sh
# The tree is clang-formatted (.clang-format): a file that is not fails here, before the builds.
part format
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z '*.cc' '*.h' '*.c' | xargs -0 clang-format --dry-run --Werror
fi
build=${BUILD_DIR:-build/test}
source scripts/lib/asan_build.sh
part asan-build
asan_build "$build"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
part asan-test
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 300 "$@"

if [[ -z ${SKIP_TSAN:-} ]]; then
  # The service is the multi-threaded side (its event loops, the store's watcher, the
  # cache, the rate limiter, the automatic halt's evaluations and the logger's stderr flusher):
  # its unit tests, the logger's, and the integration tests that run it in process or as a
  # binary, built with -fsanitize=thread. Only those targets are built, and not the service's
  # unit tests that never start a thread (TSan finds nothing in one thread; their units run
  # threaded in service_e2e_test): a new test is in unless it is named here.
  tsan=${TSAN_BUILD_DIR:-build/tsan}
  cmake -S . -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 \
    -DCMAKE_CXX_FLAGS=-O1 -DHOTFIX_TSAN=ON -DHOTFIX_WERROR=ON \
    -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
  tsan_targets=(service_e2e_test service_auto_halt_e2e_test nginx_routing_test proxy_routing_test
                deploy_config_test common_log_test common_log_budget_test)
  single_threaded=(service_attestation_roots_test service_identity_cache_test
    service_access_log_test service_rollout_unit_test service_component_file_test
    service_h2_session_test service_memory_budget_test service_proxy_protocol_test
    service_transport_events_test service_rollout_edit_test service_rollout_tools_test)
  for f in tests/service/*_test.cc tests/service/*/*_test.cc; do
    f=$(basename "$f" .cc)
    [[ " ${single_threaded[*]} " == *" $f "* ]] || tsan_targets+=("$f")
  done
  part tsan-build
  ninja -C "$tsan" -j"$(nproc)" "${tsan_targets[@]}"
  # Reports go to files as well as failing the process: a race in a service binary a test
  # runs is caught even when the test only looks at its answers.
  reports=$PWD/$tsan/tsan-reports
  rm -rf "$reports"
  mkdir -p "$reports"
  # ignore_noninstrumented_modules: Debian's libgrpc, libssl/libcrypto and absl are not built
  # with -fsanitize=thread, so memcpy/free called from inside them (on memory their own locks
  # guard) would be reported; races in our instrumented code are still caught.
  export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 log_path=$reports/report"
  tsan_rc=0
  part tsan-test
  # Tests of executables not built here show up as <name>_NOT_BUILT: not this run's.
  ctest --test-dir "$tsan" --output-on-failure -j"$(nproc)" --timeout 300 -E '_NOT_BUILT$' ||
    tsan_rc=$?
  if compgen -G "$reports/report*" >/dev/null; then
    echo "ThreadSanitizer reports:" >&2
    cat "$reports"/report* >&2
    tsan_rc=1
  fi
  unset TSAN_OPTIONS
  ((tsan_rc == 0)) || exit "$tsan_rc"
fi

if [[ -z ${SKIP_SOAK:-} ]]; then
  # A Release build of the service (build/bench-svc): the soak bounds memory growth and
  # reports calls per second, which an ASan build would distort. scripts/reliability.sh runs
  # the full form (180 s, 3,500 held connections).
  part soak
  SOAK_SECONDS=20 SOAK_IDLE=300 SOAK_SILENT=100 SOAK_SLOW=100 SOAK_HELLO=100 bench/soak.sh
fi

if [[ -z ${SKIP_IMAGE:-} ]]; then
  # The container image (deploy/container/Dockerfile): built with podman from base images
  # made from Debian's packages, in a private storage (build/image), then run as a cluster
  # runs it (uid 65532, read-only root) with a real check-hotfix against it: 6.5 to 8.5
  # minutes on 2 cores from nothing (base images made, no cache).
  # Two commands, not `a && b`: set -e would not stop on a failure left of &&.
  part image
  deploy/container/build-image.sh
  BIN_DIR=$build/bin tests/container/image_test.sh
fi

if [[ -z ${SKIP_FUZZ:-} ]]; then
  part fuzz
  scripts/fuzz.sh --short
fi
