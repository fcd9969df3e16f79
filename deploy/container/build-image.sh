#!/usr/bin/env bash
# Builds the service's container image from deploy/container/Dockerfile with podman, without
# any registry: the base images are made here from Debian's packages (mmdebstrap) and imported
# under the names the Dockerfiles give, all in a private podman storage under DIR, so nothing
# touches the user's own podman images or containers.
#   deploy/container/build-image.sh [--bin-dir BIN | --from-source] [DIR]
#     DIR (or IMAGE_DIR)  default build/image
#     --bin-dir BIN       the two binaries already built on this host: BIN/live-patching-service
#                         and BIN/hotfix-agent from a Release build (scripts/test.sh passes
#                         build/release/bin). The host must be Debian 12, the image's base. Their
#                         --version must say this tree's version and revision (a stale build
#                         is refused). Only the slim base is made.
#     --from-source       (the default) compile them first in a Debian 12 container
#                         (deploy/container/Dockerfile.build: its build tools' stage is tagged
#                         localhost/live-patching-service-build-deps, the next run's cache);
#                         scripts/reliability.sh's image part
# Either way the image is the same Dockerfile over a context of the two stripped binaries
# (DIR/context). Makes localhost/live-patching-service:VERSION in DIR/store, prints its size
# and writes DIR/image.env (IMAGE, SERVICE_VERSION[_FROM], AGENT_VERSION, GIT_REVISION,
# IMAGE_SIZE, PODMAN_STORAGE_DRIVER) for tests/container/image_test.sh. Every later command on
# that storage takes the same options, with the same absolute paths (podman records them), e.g.
#   podman --root $PWD/build/image/store --runroot $PWD/build/image/run \
#     --tmpdir $PWD/build/image/tmp --storage-driver overlay --runtime runc images
# (the driver: image.env's PODMAN_STORAGE_DRIVER).
# Environment: SERVICE_VERSION (default: the project's version in CMakeLists.txt),
#   AGENT_VERSION (default dev, as CMakeLists.txt; with --bin-dir the binary's), GIT_REVISION
#   (default `git rev-parse --short=12 HEAD`, "-dirty" appended when tracked files differ, as
#   cmake/build_info.cmake does; "unknown" outside a git tree), REBUILD_BASES=1 (make the base
#   images again even when they exist), DEBIAN_MIRROR (default http://deb.debian.org),
#   PODMAN_STORAGE_DRIVER (overlay or vfs; default: the one DIR/store already uses, else
#   overlay where the kernel mounts it over DIR's filesystem, else vfs).
# Needs root (mmdebstrap's root mode, rootful podman) and podman, runc and mmdebstrap
# (scripts/install-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."

bin_dir='' dir=''
while (($#)); do
  case $1 in
    --bin-dir)
      [[ -n ${2:-} ]] || { echo "build-image: --bin-dir needs a folder" >&2; exit 2; }
      bin_dir=$2
      shift 2
      ;;
    --from-source) bin_dir='' && shift ;;
    -h | --help) sed -n '2,33p' "$0" && exit 0 ;;
    -*) echo "build-image: unknown flag $1" >&2 && exit 2 ;;
    *) dir=$1 && shift ;;
  esac
done
dir=${dir:-${IMAGE_DIR:-build/image}}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/store" "$dir/run" "$dir/tmp"

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

# The context: the two binaries, stripped (as `cmake --install --strip` does).
context=$dir/context
rm -rf "$context"
mkdir -p "$context/bin"
if [[ -n $bin_dir ]]; then
  for b in live-patching-service hotfix-agent; do
    [[ -x $bin_dir/$b ]] || { echo "build-image: no $bin_dir/$b (a Release build)" >&2; exit 1; }
    strip -o "$context/bin/$b" "$bin_dir/$b"
  done
  # What they say they are must be this tree: a build from another revision or version is
  # refused rather than shipped under this one's labels.
  got_service=$("$context/bin/live-patching-service" --version)
  got_agent=$("$context/bin/hotfix-agent" --version)
  if [[ -z ${AGENT_VERSION:-} ]]; then
    agent_version=$(sed -n 's/^hotfix-agent \(.*\) (revision .*)$/\1/p' <<<"$got_agent")
  fi
  for pair in "$got_service|live-patching-service $version (revision $revision)" \
              "$got_agent|hotfix-agent $agent_version (revision $revision)"; do
    if [[ ${pair%%|*} != "${pair#*|}" ]]; then
      echo "build-image: $bin_dir says '${pair%%|*}', this tree is '${pair#*|}':" \
        "rebuild it (or build --from-source)" >&2
      exit 1
    fi
  done
  # The shared libraries they load and the Debian packages that ship them (the runtime
  # Dockerfile's list).
  for f in "$context"/bin/*; do
    ldd "$f" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
      real=$(readlink -f "$lib")
      pkg=$(dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || echo "?: $lib")
      echo "build-image: ${f##*/}: $lib -> ${pkg%%:*}"
    done
  done
  from=$bin_dir
fi

# overlay: each layer holds only what its step changed, where vfs copies every layer whole (the
# build tools' stage is ~0.8 GB, copied at each step). It needs the kernel's overlayfs over
# DIR's filesystem (not inside a container whose own root is overlay): a storage of its own is
# tried once, else vfs, which works anywhere. A storage keeps the driver it was made with
# (podman refuses another): the one DIR/store has is kept. runc: on a cgroup-v1 (hybrid) host
# crun refuses ("cgroups in hybrid mode not supported"); runc works on v1 and v2 alike.
driver=${PODMAN_STORAGE_DRIVER:-}
if [[ -z $driver ]]; then
  if [[ -d $dir/store/overlay-images ]]; then
    driver=overlay
  elif [[ -d $dir/store/vfs-images ]]; then
    driver=vfs
  else
    probe=$dir/tmp/overlay-probe
    rm -rf "$probe" && mkdir -p "$probe"
    if podman --root "$probe/store" --runroot "$probe/run" --tmpdir "$probe/tmp" \
      --storage-driver overlay --runtime runc info >/dev/null 2>&1; then
      driver=overlay
    else
      driver=vfs
      echo "build-image: podman's overlay driver does not work here; vfs (slower)"
    fi
    podman --root "$probe/store" --runroot "$probe/run" --tmpdir "$probe/tmp" \
      --storage-driver "$driver" --runtime runc system reset --force >/dev/null 2>&1 || true
    rm -rf "$probe"
  fi
fi
podman=(podman --root "$dir/store" --runroot "$dir/run" --tmpdir "$dir/tmp"
        --storage-driver "$driver" --runtime runc)
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
# The runtime image is on slim; only the from-source build needs the full one.
bases=("docker.io/library/debian:12-slim slim")
[[ -n $bin_dir ]] || bases+=("docker.io/library/debian:12 full")
for base in "${bases[@]}"; do
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

t0=$SECONDS
build=("${podman[@]}" build --pull=never --network=host "${ulimits[@]}")
if [[ -z $bin_dir ]]; then
  echo "build-image: compiling both binaries in a container (deploy/container/Dockerfile.build)"
  source_build=("${build[@]}" --file deploy/container/Dockerfile.build)
  # The build tools' stage first, tagged: it stays the cache of the next run while the prune
  # below drops the rest of the build stages (under vfs every layer is a full copy of its
  # tree, ~0.8 GB each there). The full build then finds it in the cache.
  "${source_build[@]}" --target build-deps --tag localhost/live-patching-service-build-deps:latest .
  "${source_build[@]}" --build-arg "SERVICE_VERSION=$version" \
    --build-arg "AGENT_VERSION=$agent_version" --build-arg "GIT_REVISION=$revision" \
    --tag localhost/live-patching-service-binaries:latest .
  ctr=$("${podman[@]}" create localhost/live-patching-service-binaries:latest /bin/hotfix-agent)
  for b in live-patching-service hotfix-agent; do
    "${podman[@]}" cp "$ctr:/bin/$b" "$context/bin/$b"
  done
  "${podman[@]}" rm "$ctr" >/dev/null
  "${podman[@]}" rmi localhost/live-patching-service-binaries:latest >/dev/null
  from="a container build"
fi
t1=$SECONDS
echo "build-image: building $image from the binaries of $from (revision $revision)"
"${build[@]}" --file deploy/container/Dockerfile --build-arg "SERVICE_VERSION=$version" \
  --build-arg "GIT_REVISION=$revision" --build-arg "SOURCE_URL=$source_url" --tag "$image" \
  "$context"
t2=$SECONDS
"${podman[@]}" image prune --force >/dev/null
echo "build-image: built in $((SECONDS - t0)) s (the binaries $((t1 - t0)) s, the image" \
  "$((t2 - t1)) s, pruning $((SECONDS - t2)) s; storage driver $driver)"

size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
cat >"$dir/image.env" <<EOF
IMAGE=$image
SERVICE_VERSION=$version
SERVICE_VERSION_FROM=$version_from
AGENT_VERSION=$agent_version
GIT_REVISION=$revision
IMAGE_SIZE=$size
PODMAN_STORAGE_DRIVER=$driver
EOF
echo "build-image: $image is $((size / 1000000)) MB ($size bytes) in $dir/store"
