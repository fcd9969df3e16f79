#!/usr/bin/env bash
# Builds the service's container image from deploy/container/Dockerfile with podman, without
# any registry: the two base images the Dockerfile names are made here from Debian's packages
# (mmdebstrap) and imported under those names, all in a private podman storage under DIR, so
# nothing touches the user's own podman images or containers.
#   deploy/container/build-image.sh [DIR]      DIR (or IMAGE_DIR) default build/image
# Makes localhost/live-patching-service:VERSION (and, as the next run's cache, the build tools'
# stage localhost/live-patching-service-build-deps) in DIR/store, prints its size and writes
# DIR/image.env (IMAGE, SERVICE_VERSION[_FROM], AGENT_VERSION, GIT_REVISION, IMAGE_SIZE) for
# tests/container/image_test.sh. Every later command on that storage takes the same options,
# with the same absolute paths (podman records them), e.g.
#   podman --root $PWD/build/image/store --runroot $PWD/build/image/run \
#     --tmpdir $PWD/build/image/tmp --storage-driver vfs --runtime runc images
# Environment: SERVICE_VERSION (default: the project's version in CMakeLists.txt),
#   AGENT_VERSION (default dev, as CMakeLists.txt), GIT_REVISION (default `git rev-parse
#   --short=12 HEAD`, "-dirty" appended when tracked files differ, as cmake/build_info.cmake
#   does; "unknown" outside a git tree), REBUILD_BASES=1 (make the base images again even when
#   they exist), DEBIAN_MIRROR (default http://deb.debian.org).
# Needs root (mmdebstrap's root mode, rootful podman) and podman, runc and mmdebstrap
# (scripts/install-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=${1:-${IMAGE_DIR:-build/image}}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/store" "$dir/run" "$dir/tmp"
# vfs: works on any filesystem, inside a container too (no overlay on overlay). runc: on a
# cgroup-v1 (hybrid) host crun refuses ("cgroups in hybrid mode not supported"); runc works on
# v1 and v2 alike.
podman=(podman --root "$dir/store" --runroot "$dir/run" --tmpdir "$dir/tmp"
        --storage-driver vfs --runtime runc)
# Explicit limits below the host's hard ones: podman's defaults (nofile 1048576) fail with
# "setrlimit ... operation not permitted" where the caller may not raise its hard limits.
ulimits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org}

# What the official images are, made with Debian's own packages: debian:12 is a minbase
# bootstrap plus debuerreotype's "minimizing" configuration (no services started by
# installs, no apt caches or translations, unsafe-io dpkg); debian:12-slim is the same with
# the docs, man pages, info and locales dpkg would unpack left out (debuerreotype-slimify's
# path-excludes, keeping the copyright files).
make_base() {  # NAME slim|full
  local name=$1 kind=$2 tar t0
  tar=$dir/tmp/base-$kind.tar
  # merged /usr set up by mmdebstrap's hook (usr-is-merged), as the official images: the
  # usrmerge package would pull perl in.
  # (The sources are given whole below, so no signed-by is inferred: no gpg needed.)
  # shellcheck disable=SC2016  # mmdebstrap runs the hooks with $1 = the new root
  local opts=(--variant=minbase --format=tar --skip=check/signed-by
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    --aptopt='Acquire::Languages "none"' --aptopt='Acquire::GzipIndexes "true"'
    --aptopt='Apt::AutoRemove::SuggestsImportant "false"'
    --dpkgopt='force-unsafe-io'
    # apt-get clean after every install and update, as the official images' docker-clean
    --aptopt='DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; }'
    --aptopt='APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; }'
    --aptopt='Dir::Cache::pkgcache ""' --aptopt='Dir::Cache::srcpkgcache ""'
    # policy-rc.d: an install in a build never starts a service (mmdebstrap's own temporary
    # one is skipped: it would take ours away when it restores); the build host's resolver and
    # name do not go into the image (the runtime mounts its own).
    --skip=chroot/policy-rc.d
    --essential-hook='printf "#!/bin/sh\nexit 101\n" >"$1/usr/sbin/policy-rc.d" && chmod 0755 "$1/usr/sbin/policy-rc.d"'
    --customize-hook='rm -f "$1/etc/resolv.conf" && : >"$1/etc/hostname"')
  if [[ $kind == slim ]]; then
    local p
    for p in /usr/share/doc/'*' /usr/share/groff/'*' /usr/share/info/'*' /usr/share/linda/'*' \
      /usr/share/lintian/overrides/'*' /usr/share/locale/'*' /usr/share/man/'*'; do
      opts+=(--dpkgopt="path-exclude=$p")
    done
    for p in /usr/share/doc/'*'/copyright /usr/share/locale/locale.alias; do
      opts+=(--dpkgopt="path-include=$p")
    done
  fi
  echo "build-image: making $name with mmdebstrap"
  t0=$SECONDS
  mmdebstrap --quiet "${opts[@]}" bookworm "$tar" \
    "deb $mirror/debian bookworm main" \
    "deb $mirror/debian bookworm-updates main" \
    "deb $mirror/debian-security bookworm-security main"
  "${podman[@]}" import --quiet --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$tar" "$name" >/dev/null
  rm -f "$tar"
  echo "build-image: $name made in $((SECONDS - t0)) s"
}
for base in "docker.io/library/debian:12 full" "docker.io/library/debian:12-slim slim"; do
  read -r name kind <<<"$base"
  if [[ -n ${REBUILD_BASES:-} ]] && "${podman[@]}" image exists "$name"; then
    "${podman[@]}" rmi --force "$name" >/dev/null
  fi
  if "${podman[@]}" image exists "$name"; then
    echo "build-image: $name present in $dir/store"
  else
    make_base "$name" "$kind"
  fi
done

# The versions stamped into the binaries (and the image's labels).
version_from=environment
if [[ -z ${SERVICE_VERSION:-} ]]; then
  version_from=CMakeLists.txt
  SERVICE_VERSION=$(sed -n 's/^project([^ ]* VERSION \([0-9][0-9.]*\).*/\1/p' CMakeLists.txt)
fi
version=$SERVICE_VERSION
[[ -n $version ]] || { echo "build-image: no project VERSION in CMakeLists.txt" >&2; exit 1; }
agent_version=${AGENT_VERSION:-dev}
if [[ -n ${GIT_REVISION:-} ]]; then
  revision=$GIT_REVISION
elif revision=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    revision+=-dirty
  fi
else
  revision=unknown
fi
source_url=$(git remote get-url origin 2>/dev/null || echo unknown)
image=localhost/live-patching-service:$version

echo "build-image: building $image (revision $revision)"
t0=$SECONDS
build=("${podman[@]}" build --pull=never --network=host "${ulimits[@]}"
       --file deploy/container/Dockerfile)
# The build tools' stage first, tagged: it stays the cache of the next run while the prune
# below drops the rest of the build stages (under vfs every layer is a full copy of its tree,
# ~0.8 GB each there). The full build then finds it in the cache.
"${build[@]}" --target build-deps --tag localhost/live-patching-service-build-deps:latest .
t1=$SECONDS
"${build[@]}" --build-arg "SERVICE_VERSION=$version" --build-arg "AGENT_VERSION=$agent_version" \
  --build-arg "GIT_REVISION=$revision" --build-arg "SOURCE_URL=$source_url" --tag "$image" .
t2=$SECONDS
"${podman[@]}" image prune --force >/dev/null
echo "build-image: built in $((SECONDS - t0)) s (build tools $((t1 - t0)) s, the image" \
  "$((t2 - t1)) s, pruning $((SECONDS - t2)) s)"

size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
cat >"$dir/image.env" <<EOF
IMAGE=$image
SERVICE_VERSION=$version
SERVICE_VERSION_FROM=$version_from
AGENT_VERSION=$agent_version
GIT_REVISION=$revision
IMAGE_SIZE=$size
EOF
echo "build-image: $image is $((size / 1000000)) MB ($size bytes) in $dir/store"
