#!/usr/bin/env bash
# The test command: installs what it needs, checks the formatting, builds with ASan+UBSan and
# -Werror, runs every test (unit and integration: the service under libgrpc++ and grpc-go
# clients and attack, real HAProxy and nginx, real certificates; every fuzz target's seeds
# replayed) in CTest; then the tests with threads to race again under ThreadSanitizer; then
# one Release build of the two binaries (build/release), which the soak's short form (the
# service under load through HAProxy while its store reloads and hundreds of idle and slow
# connections are held) runs, and the density check (2,000 idle TLS connections in a 128Mi memory
# cgroup, bench/density.sh), and the container image is built from, and the image's test
# (docs/RELIABILITY.md). Timed fuzzing, the soak in full and the image compiled from source
# are scripts/reliability.sh's.
#   scripts/test.sh [extra ctest args, e.g. -L node or -R Nbc]   (they apply to the first run)
#   SKIP_TSAN=1 / SKIP_SOAK=1 / SKIP_IMAGE=1 leave out the TSan run, the soak and the density
#   check, and the image's build and test (the Release build is left out with the last two).
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
# On CI the test build is done with once its tests pass: its 1.9 GB go before the next builds
# take theirs (a CI machine's free disk varies, and once ran out here). Nothing below uses it.
if [[ ${CI:-} == true ]]; then rm -rf "$build"; fi

if [[ -z ${SKIP_TSAN:-} ]]; then
  # The service is the multi-threaded side (its event loops, the store's watcher, the
  # certificate folder's reloads, the cache, the rate limiter, the automatic halt's
  # evaluations and the logger's stderr flusher): its unit tests, the logger's, and the
  # integration tests that run it in process or as a binary, built with -fsanitize=thread.
  # Only those targets are built, and only tests with threads to race: not the service's unit
  # tests that never start a thread (TSan finds nothing in one thread; their units run
  # threaded in service_e2e_test and service_sni_certs_test), nor deploy_config_test (it runs
  # the service only for --help) or proxy_routing_test (the proxies and the tests' own
  # fixtures, no code of ours but one TLS client per call). A new unit test of the service is
  # in unless it is named here.
  tsan=${TSAN_BUILD_DIR:-build/tsan}
  cmake -S . -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 \
    -DCMAKE_CXX_FLAGS=-O1 -DHOTFIX_TSAN=ON -DHOTFIX_SHARED_LIBS=ON -DHOTFIX_WERROR=ON \
    -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
  tsan_targets=(service_e2e_test service_auto_halt_e2e_test service_sni_certs_test
                nginx_routing_test common_log_test common_log_budget_test)
  single_threaded=(service_attestation_roots_test service_identity_cache_test
    service_access_log_test service_rollout_unit_test service_component_file_test
    service_h2_session_test service_memory_budget_test service_connection_memory_test
    service_proxy_protocol_test
    service_transport_events_test service_rollout_edit_test service_rollout_tools_test
    service_server_certificates_test service_certificate_folder_test service_report_test
    node_sketch_test service_cgroup_limits_test service_subscription_allow_list_test
    service_operator_tools_test service_rollout_status_test service_attested_content_test
    service_listen_socket_test)
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
  # Only the gtest tests (labelled by folder): not the install check or promtool's rule tests
  # (the ASan run's; no thread of ours). Tests of executables not built here show up as
  # <name>_NOT_BUILT: not this run's.
  ctest --test-dir "$tsan" --output-on-failure -j"$(nproc)" --timeout 300 \
    -L '^(common|service|integration)$' -E '_NOT_BUILT$' || tsan_rc=$?
  if compgen -G "$reports/report*" >/dev/null; then
    echo "ThreadSanitizer reports:" >&2
    cat "$reports"/report* >&2
    tsan_rc=1
  fi
  unset TSAN_OPTIONS
  ((tsan_rc == 0)) || exit "$tsan_rc"
fi

# One Release build (build/release, as README's "Building by hand" and the benchmarks):
# the soak runs its service, the image is built from its two binaries.
release=${RELEASE_BUILD_DIR:-build/release}
if [[ -z ${SKIP_SOAK:-} || -z ${SKIP_IMAGE:-} ]]; then
  part release
  cmake -S . -B "$release" -G Ninja -DCMAKE_BUILD_TYPE=Release -U HOTFIX_STATIC_DEPS \
    -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
  ninja -C "$release" -j"$(nproc)" live-patching-service hotfix-agent imds-standin
fi

if [[ -z ${SKIP_SOAK:-} ]]; then
  # Release, not ASan: the soak bounds memory growth and reports calls per second, which an
  # ASan build would distort. scripts/reliability.sh runs the full form (180 s, 3,500 held
  # connections).
  part soak
  SOAK_BIN_DIR=$release/bin SOAK_SECONDS=20 SOAK_IDLE=300 SOAK_SILENT=100 SOAK_SLOW=100 \
    SOAK_HELLO=100 bench/soak.sh
  # Issue 31's density goal, on the build it is about: 2,000 idle TLS connections held under
  # a 128Mi limit (a memory cgroup of its own when the machine allows, as a pod's), below it,
  # and a node answered (docs/SERVICE.md, "Memory").
  part density
  DENSITY_BIN_DIR=$release/bin bench/density.sh
fi

if [[ -z ${SKIP_IMAGE:-} ]]; then
  # The container image (deploy/container/Dockerfile) from the Release build's binaries: built
  # with podman on a base image made from Debian's packages, in a private storage
  # (build/image), then run as a cluster runs it (uid 65532, read-only root) with a real
  # check-hotfix against it (the Release build's hotfix-agent and IMDS stand-in).
  # scripts/reliability.sh's image part compiles them in a container instead
  # (build-image.sh --from-source).
  # Two commands, not `a && b`: set -e would not stop on a failure left of &&.
  part image
  deploy/container/build-image.sh --bin-dir "$release/bin"
  BIN_DIR=$release/bin tests/container/image_test.sh
fi
