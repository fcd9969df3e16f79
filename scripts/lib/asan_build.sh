# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/reliability.sh: the test build, ASan+UBSan and
# -Werror, in one place so the two never build it differently.
#   asan_build DIR [target ...]    configure DIR and build it (only the targets, if given)
# Compiled with Debian's clang 14 (the fuzz build's compiler): at -O0 with ASan+UBSan it builds
# the tree in half GCC 12's time (docs/BENCHMARKS.md, "The test command's time"). GCC keeps
# its -Werror warnings over src/ and the service's tests in the TSan build, and builds the
# Release binaries.
asan_build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DHOTFIX_SANITIZE=ON -DHOTFIX_SHARED_LIBS=ON -DHOTFIX_WERROR=ON -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
  ninja -C "$dir" -j"$(nproc)" "$@"
}
