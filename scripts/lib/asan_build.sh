# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/reliability.sh: the test build, ASan+UBSan and
# -Werror, in one place so the two never build it differently.
#   asan_build DIR [target ...]    configure DIR and build it (only the targets, if given)
asan_build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DHOTFIX_SANITIZE=ON -DHOTFIX_WERROR=ON -DHOTFIX_AGENT_VERSION=202604.01.0 >/dev/null
  ninja -C "$dir" -j"$(nproc)" "$@"
}
