#!/usr/bin/env bash
# Builds REAL signed package repositories for the repository fast path's tests, the demo and
# the benchmark (docs/DOWNLOAD-HOTFIX.md; AgentBaker #9451 deb, #9505 rpm): a throwaway
# OpenPGP key, an apt repository (pool/, dists/<suite>/{InRelease,Release,Release.gpg},
# Packages[.gz]) and a yum repository (Packages/a/*.rpm, repodata/repomd.xml{,.asc}, a
# gzip'ed primary) made by Debian's own tools, and a private rpm database holding the key.
# One implementation: tests/support/signed_repo.{h,cc} runs this script for the gtests.
#
# usage:
#   make-signed-repo.sh key KEYDIR [--algo ed25519|rsa2048|rsa3072|rsa4096]
#                                  [--uid 'NAME <EMAIL>']
#       A new signing key (no passphrase; default ed25519) in KEYDIR/gnupg, a private
#       GNUPGHOME (never ~/.gnupg), and KEYDIR/keyring.gpg (binary, `gpg --export`),
#       KEYDIR/keyring.asc (armored) and KEYDIR/fingerprint (40 hex digits, one line).
#       Replaces a key already in KEYDIR.
#
#   make-signed-repo.sh deb REPO_DIR --key KEYDIR --version HOTFIX --ubuntu VERSION_ID
#                           --arch amd64|arm64 (--binary FILE | --no-binary)
#                           [--binary-symlink] [--size-mib N] [--suite S] [--component C]
#                           [--no-gz] [--compress gzip|xz|zstd|none] [--package NAME]
#       Builds aks-node-controller_<HOTFIX>-ubuntu<VERSION_ID>u1_<arch>.deb (dpkg-deb, root
#       owned) holding usr/bin/aks-node-controller = FILE (0755) at
#       REPO_DIR/pool/main/a/aks-node-controller/, then rewrites the suite's indices from every
#       .deb in pool/: dists/<suite>/<component>/binary-<arch>/Packages (+ Packages.gz unless
#       --no-gz) for each architecture in pool/, dists/<suite>/Release (apt-ftparchive),
#       InRelease (gpg --clearsign) and Release.gpg (detached). Run it again with another
#       --version (or --arch) to add packages to the same repository; the indices of the suite
#       follow the last run's flags.
#         --binary-symlink  usr/bin/aks-node-controller is a symlink to
#                           ../lib/aks-node-controller/aks-node-controller (which holds FILE)
#         --no-binary       no usr/bin/aks-node-controller at all (only a README)
#         --size-mib N      pad the package to about N MiB with random (incompressible) bytes
#                           in usr/share/aks-node-controller/padding.bin
#         --suite S         default: the Ubuntu codename (20.04 focal, 22.04 jammy,
#                           24.04 noble), else "stable"
#         --component C     default main (the dists/ folder only: the pool path is always
#                           pool/main/..., as the node computes it)
#         --compress T      the .deb's data compression, default gzip (level 1). Random padding
#                           does not compress: 40 MiB take ~1.8 s with gzip, ~0.9 s with
#                           none, ~1.4 s with zstd and ~27 s with xz (two cores)
#         --package NAME    another package name (default aks-node-controller), e.g. to make
#                           the node's stanza missing
#       Prints the .deb's absolute path. (dpkg-deb writes symlinks after the other members, so
#       --binary-symlink's link is the only, and the last, usr/bin/aks-node-controller.)
#
#   make-signed-repo.sh rpm REPO_DIR --key KEYDIR --version HOTFIX --arch x86_64|aarch64
#                           (--binary FILE | --no-binary) [--binary-symlink] [--unsigned]
#                           [--size-mib N] [--release R] [--compress gzip|xz|zstd|none]
#       Builds aks-node-controller-<HOTFIX>-<R>.<arch>.rpm (R default 1.azl3) with rpmbuild
#       from a generated spec (any --arch on any host), signs it with rpmsign (unless
#       --unsigned), puts it at REPO_DIR/Packages/a/, runs createrepo_c over REPO_DIR (every
#       rpm in it: run again to add versions) with a gzip'ed primary and no sqlite databases,
#       and signs repodata/repomd.xml into repodata/repomd.xml.asc (gpg --detach-sign
#       --armor). Prints the .rpm's absolute path. rpmsign (rpm 4.18) adds one V4 header
#       signature, no header+payload one; `--compress` as for deb (rpm payload w1.gzdio,
#       w2.xzdio, w3.zstdio or w.ufdio); --binary-symlink and --no-binary as for deb.
#
#   make-signed-repo.sh rpmdb DBDIR --key KEYDIR
#       A private rpm database in DBDIR (absolute or relative; created) with the key imported,
#       for `rpmkeys --dbpath DBDIR --checksig`. Never touches the machine's rpm database.
#
#   make-signed-repo.sh resign REPO_DIR --key KEYDIR [--suite S] [--regz] [--primary FILE]
#       After a test edited signed metadata on purpose, sign it again. deb (REPO_DIR/dists/
#       exists): rewrites dists/<suite>/Release from the index files as they are now, then
#       InRelease and Release.gpg (--suite: default the only suite in dists/; --regz first
#       rewrites each Packages.gz from the Packages beside it). rpm (REPO_DIR/repodata/
#       exists): --primary FILE (an edited, uncompressed primary.xml) replaces the primary
#       (modifyrepo_c: gzip'ed, new checksums in repomd.xml); then signs repomd.xml again.
#
#   make-signed-repo.sh aptsource FILE --uri URI [--suite S] [--component C]
#                                 [--signed-by PATH]... [--arch A]... [--format list|sources]
#       An apt source for the repository: FILE ending in .list gets one line
#       `deb [arch=A,... signed-by=PATH,...] URI S C`, .sources a deb822 paragraph (--format
#       overrides the choice by extension). Suite default stable, component main.
#
#   make-signed-repo.sh yumrepo FILE --baseurl URL [--section NAME] [--gpgkey URL]...
#                               [--enabled 0|1] [--gpgcheck 0|1]
#       A yum/dnf .repo file, section default azurelinux-official-ms-oss, gpgkey e.g.
#       file:///path/to/keyring.asc.
#
# What a test edits for each case (then, where it says so, `resign`):
#   deb  bad signature          another KEYDIR's keyring.gpg at the client, or flip a byte of
#                               the signed text in dists/<suite>/InRelease (no resign)
#        malformed InRelease    dists/<suite>/InRelease (no resign)
#        wrong Packages size    append to dists/<suite>/<component>/binary-<arch>/Packages.gz
#                               (or Packages with --no-gz), no resign
#        Filename/SHA256 wrong  build with --no-gz, edit .../Packages, `resign` (or edit
#                               Packages and `resign --regz` when Packages.gz is listed)
#        missing stanza         another --version/--package than the node asks for
#        package SHA mismatch   overwrite the .deb in pool/ after the build (no resign)
#        member a symlink/absent --binary-symlink / --no-binary
#   rpm  bad repomd signature   edit repodata/repomd.xml or repomd.xml.asc (no resign), or
#                               another key's keyring at the client
#        primary size/SHA wrong repodata/*-primary.xml.gz (its name is repomd.xml's
#                               <location href> of <data type="primary">), no resign
#        location/checksum wrong gunzip the primary, edit it, `resign --primary edited.xml`
#        package SHA mismatch   overwrite Packages/a/*.rpm after the build (no resign)
#        unsigned / other key   --unsigned, or an rpmdb made with another KEYDIR
#
# Every signing run copies KEYDIR/gnupg into a short private folder under /tmp (gpg-agent's
# socket path must stay under 108 bytes, and concurrent runs with one key must not share an
# agent) and ends that agent (gpgconf --kill all) and removes the folder on exit, also on
# failure. rpm runs with HOME set to a scratch folder, so ~/.rpmmacros is never read.
# Needs: gnupg, gpgv, dpkg-dev, apt-utils, rpm, createrepo-c (scripts/install-deps.sh).
set -euo pipefail
umask 022

prog=${0##*/}
die() {
  echo "$prog: $*" >&2
  exit 2
}

# --- cleanup: the scratch folder and the gpg home (agent killed first) --------------------
scratch=""
gpg_home=""
cleanup() {
  if [[ -n "$gpg_home" ]]; then
    gpgconf --homedir "$gpg_home" --kill all >/dev/null 2>&1 || true
    rm -rf "$gpg_home"
  fi
  if [[ -n "$scratch" ]]; then rm -rf "$scratch"; fi
}
trap cleanup EXIT
# A signal (a test's timeout sends SIGTERM to the process group first) still cleans up.
trap 'exit 143' TERM INT HUP

make_scratch() {
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/lp-signed-repo.XXXXXX")
  export HOME="$scratch/home"  # no ~/.rpmmacros, no ~/.gnupg
  mkdir -p "$HOME"
}

# A fresh GNUPGHOME with a path short enough for gpg-agent's sockets.
new_gpg_home() {
  gpg_home=$(mktemp -d /tmp/lpgpg.XXXXXX)
  chmod 700 "$gpg_home"
  export GNUPGHOME="$gpg_home"
}

# gpg on the private home, never interactive.
gpg_run() {
  gpg --homedir "$gpg_home" --batch --yes --no-tty --quiet --pinentry-mode loopback \
    --passphrase '' "$@"
}

# Copies a gpg home's files (not its sockets or lock files) into another folder.
copy_gpg_home() {
  local from=$1 to=$2 f
  for f in "$from"/*; do
    case ${f##*/} in S.* | '*') continue ;; esac
    cp -a "$f" "$to/"
  done
}

# Loads KEYDIR's key into a private gpg home; sets key_fpr.
key_fpr=""
use_key() {
  local keydir=$1
  [[ -n "$keydir" ]] || die "--key KEYDIR is required"
  [[ -f "$keydir/fingerprint" && -d "$keydir/gnupg" ]] ||
    die "$keydir is not a key folder (make one with: $prog key $keydir)"
  key_fpr=$(<"$keydir/fingerprint")
  new_gpg_home
  copy_gpg_home "$keydir/gnupg" "$gpg_home"
}

need() { (($# >= 2)) || die "$1 needs a value"; }

abspath() { realpath -m -s -- "$1"; }

# --- key -----------------------------------------------------------------------------------
cmd_key() {
  (($# >= 1)) || die "usage: $prog key KEYDIR [--algo A] [--uid UID]"
  local dir=$1 algo=ed25519 uid="AKS live patching test repository <repo@aks-live-patching.test>"
  shift
  while (($#)); do
    case $1 in
      --algo) need "$@"; algo=$2; shift 2 ;;
      --uid) need "$@"; uid=$2; shift 2 ;;
      *) die "key: unknown option $1" ;;
    esac
  done
  case $algo in ed25519 | rsa2048 | rsa3072 | rsa4096) ;; *) die "key: unknown --algo $algo" ;; esac
  mkdir -p "$dir"
  new_gpg_home
  gpg_run --quick-gen-key "$uid" "$algo" sign never 2>"$gpg_home/genkey.log" || {
    cat "$gpg_home/genkey.log" >&2
    die "key: gpg --quick-gen-key failed"
  }
  local fpr
  fpr=$(gpg_run --with-colons --list-secret-keys | awk -F: '$1 == "fpr" { print $10; exit }')
  [[ "$fpr" =~ ^[0-9A-F]{40}$ ]] || die "key: no fingerprint from gpg"
  gpg_run --export "$fpr" >"$dir/keyring.gpg.new"
  gpg_run --armor --export "$fpr" >"$dir/keyring.asc.new"
  mv "$dir/keyring.gpg.new" "$dir/keyring.gpg"
  mv "$dir/keyring.asc.new" "$dir/keyring.asc"
  rm -rf "$dir/gnupg"
  mkdir -m 700 "$dir/gnupg"
  rm -f "$gpg_home/genkey.log"
  gpgconf --homedir "$gpg_home" --kill all >/dev/null 2>&1 || true
  copy_gpg_home "$gpg_home" "$dir/gnupg"
  echo "$fpr" >"$dir/fingerprint"
  echo "$fpr"
}

# --- deb -----------------------------------------------------------------------------------
ubuntu_codename() {
  case $1 in
    18.04) echo bionic ;;
    20.04) echo focal ;;
    22.04) echo jammy ;;
    24.04) echo noble ;;
    *) echo stable ;;
  esac
}

# Random, incompressible padding: N MiB minus what is already there (never negative).
write_padding() {
  local path=$1 mib=$2 have=$3 bytes
  bytes=$((mib * 1048576 - have))
  ((bytes > 0)) || return 0
  mkdir -p "$(dirname "$path")"
  head -c "$bytes" /dev/urandom >"$path"
}

# Writes the suite's Release from the index files as they are, then InRelease and Release.gpg.
sign_deb_suite() {
  local repo=$1 suite=$2 dir archs comps
  dir="$repo/dists/$suite"
  [[ -d "$dir" ]] || die "no $dir"
  rm -f "$dir/Release" "$dir/InRelease" "$dir/Release.gpg"
  archs=$(find "$dir" -mindepth 2 -maxdepth 2 -type d -name 'binary-*' -printf '%f\n' |
    sed 's/^binary-//' | sort -u | tr '\n' ' ')
  comps=$(find "$dir" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | tr '\n' ' ')
  apt-ftparchive \
    -o "APT::FTPArchive::Release::Origin=aks-live-patching-test" \
    -o "APT::FTPArchive::Release::Label=aks-live-patching-test" \
    -o "APT::FTPArchive::Release::Suite=$suite" \
    -o "APT::FTPArchive::Release::Codename=$suite" \
    -o "APT::FTPArchive::Release::Architectures=${archs% }" \
    -o "APT::FTPArchive::Release::Components=${comps% }" \
    -o "APT::FTPArchive::Release::Description=AKS live patching test repository" \
    release "$dir" >"$scratch/Release"
  mv "$scratch/Release" "$dir/Release"
  gpg_run --local-user "$key_fpr" --digest-algo SHA256 --clearsign \
    --output "$dir/InRelease" "$dir/Release"
  gpg_run --local-user "$key_fpr" --digest-algo SHA256 --armor --detach-sign \
    --output "$dir/Release.gpg" "$dir/Release"
}

cmd_deb() {
  (($# >= 1)) || die "usage: $prog deb REPO_DIR --key KEYDIR ... (see the header)"
  local repo=$1 keydir="" version="" ubuntu="" arch="" binary="" no_binary=0 symlink=0
  local suite="" component=main gz=1 size_mib=0 compress=gzip package=aks-node-controller
  shift
  while (($#)); do
    case $1 in
      --key) need "$@"; keydir=$2; shift 2 ;;
      --version) need "$@"; version=$2; shift 2 ;;
      --ubuntu) need "$@"; ubuntu=$2; shift 2 ;;
      --arch) need "$@"; arch=$2; shift 2 ;;
      --binary) need "$@"; binary=$2; shift 2 ;;
      --no-binary) no_binary=1; shift ;;
      --binary-symlink) symlink=1; shift ;;
      --suite) need "$@"; suite=$2; shift 2 ;;
      --component) need "$@"; component=$2; shift 2 ;;
      --no-gz) gz=0; shift ;;
      --size-mib) need "$@"; size_mib=$2; shift 2 ;;
      --compress) need "$@"; compress=$2; shift 2 ;;
      --package) need "$@"; package=$2; shift 2 ;;
      *) die "deb: unknown option $1" ;;
    esac
  done
  [[ "$version" =~ ^[0-9A-Za-z.+~]+$ ]] || die "deb: --version must be like 202608.26.2"
  [[ "$ubuntu" =~ ^[0-9A-Za-z.]+$ ]] || die "deb: --ubuntu must be a VERSION_ID like 22.04"
  [[ "$arch" =~ ^[a-z0-9]+$ ]] || die "deb: --arch must be a Debian architecture (amd64, arm64)"
  [[ "$size_mib" =~ ^[0-9]+$ ]] || die "deb: --size-mib must be a whole number"
  [[ "$package" =~ ^[a-z0-9][a-z0-9.+-]+$ ]] || die "deb: bad --package $package"
  case $compress in gzip | xz | zstd | none) ;; *) die "deb: unknown --compress $compress" ;; esac
  if ((no_binary)); then
    ((!symlink)) || die "deb: --binary-symlink and --no-binary exclude each other"
  else
    [[ -n "$binary" && -f "$binary" ]] || die "deb: --binary FILE (an existing file) or --no-binary"
  fi
  [[ -n "$suite" ]] || suite=$(ubuntu_codename "$ubuntu")
  make_scratch
  use_key "$keydir"

  local full="$version-ubuntu${ubuntu}u1" root="$scratch/root" have=0
  mkdir -p "$root/DEBIAN" "$root/usr/share/doc/$package"
  if ((no_binary)); then
    echo "A package without usr/bin/aks-node-controller (a test case)." \
      >"$root/usr/share/doc/$package/README"
  elif ((symlink)); then
    install -D -m 0755 "$binary" "$root/usr/lib/aks-node-controller/aks-node-controller"
    mkdir -p "$root/usr/bin"
    ln -s ../lib/aks-node-controller/aks-node-controller "$root/usr/bin/aks-node-controller"
    have=$(stat -c %s "$binary")
  else
    install -D -m 0755 "$binary" "$root/usr/bin/aks-node-controller"
    have=$(stat -c %s "$binary")
  fi
  write_padding "$root/usr/share/aks-node-controller/padding.bin" "$size_mib" "$have"
  local kib
  kib=$(du -s -k --apparent-size --exclude=DEBIAN "$root" | cut -f1)
  cat >"$root/DEBIAN/control" <<EOF
Package: $package
Version: $full
Architecture: $arch
Maintainer: AKS live patching tests <aks-live-patching@example.invalid>
Installed-Size: $kib
Section: admin
Priority: optional
Description: AKS node controller (test package)
 Built by tests/support/make-signed-repo.sh for the repository fast path's tests.
EOF
  find "$root" -type d -exec chmod 0755 {} +
  local level=()
  if [[ "$compress" == gzip ]]; then level=(-z1); fi
  local pool="$repo/pool/main/${package:0:1}/$package"
  local deb="$pool/${package}_${full}_${arch}.deb"
  mkdir -p "$pool"
  dpkg-deb --root-owner-group "-Z$compress" "${level[@]}" --build "$root" "$scratch/out.deb" \
    >/dev/null
  mv "$scratch/out.deb" "$deb"

  # Indices: every architecture with a package in pool/, from every package in pool/.
  local a dir
  local -a archs
  mapfile -t archs < <(find "$repo/pool" -name '*.deb' -printf '%f\n' |
    sed -E 's/.*_([^_]+)\.deb$/\1/' | sort -u)
  for a in "${archs[@]}"; do
    dir="$repo/dists/$suite/$component/binary-$a"
    mkdir -p "$dir"
    (cd "$repo" && apt-ftparchive --arch "$a" packages pool) >"$scratch/Packages" 2>"$scratch/ftparchive.log" || {
      cat "$scratch/ftparchive.log" >&2
      die "deb: apt-ftparchive packages failed"
    }
    mv "$scratch/Packages" "$dir/Packages"
    if ((gz)); then
      gzip -9 -n -c "$dir/Packages" >"$dir/Packages.gz"
    else
      rm -f "$dir/Packages.gz"
    fi
  done
  sign_deb_suite "$repo" "$suite"
  abspath "$deb"
}

# --- rpm -----------------------------------------------------------------------------------
payload_macro() {
  case $1 in
    gzip) echo w1.gzdio ;;
    xz) echo w2.xzdio ;;
    zstd) echo w3.zstdio ;;
    none) echo w.ufdio ;;
    *) die "rpm: unknown --compress $1" ;;
  esac
}

sign_repomd() {
  local repo=$1
  rm -f "$repo/repodata/repomd.xml.asc"
  gpg_run --local-user "$key_fpr" --digest-algo SHA256 --armor --detach-sign \
    --output "$repo/repodata/repomd.xml.asc" "$repo/repodata/repomd.xml"
}

cmd_rpm() {
  (($# >= 1)) || die "usage: $prog rpm REPO_DIR --key KEYDIR ... (see the header)"
  local repo=$1 keydir="" version="" arch="" binary="" no_binary=0 symlink=0 unsigned=0
  local size_mib=0 release=1.azl3 compress=gzip
  shift
  while (($#)); do
    case $1 in
      --key) need "$@"; keydir=$2; shift 2 ;;
      --version) need "$@"; version=$2; shift 2 ;;
      --arch) need "$@"; arch=$2; shift 2 ;;
      --binary) need "$@"; binary=$2; shift 2 ;;
      --no-binary) no_binary=1; shift ;;
      --binary-symlink) symlink=1; shift ;;
      --unsigned) unsigned=1; shift ;;
      --size-mib) need "$@"; size_mib=$2; shift 2 ;;
      --release) need "$@"; release=$2; shift 2 ;;
      --compress) need "$@"; compress=$2; shift 2 ;;
      *) die "rpm: unknown option $1" ;;
    esac
  done
  [[ "$version" =~ ^[0-9A-Za-z.+~_]+$ ]] || die "rpm: --version must be like 202608.26.2"
  [[ "$release" =~ ^[0-9A-Za-z.+~_]+$ ]] || die "rpm: bad --release $release"
  [[ "$arch" =~ ^[a-z0-9_]+$ ]] || die "rpm: --arch must be an rpm architecture (x86_64, aarch64)"
  [[ "$size_mib" =~ ^[0-9]+$ ]] || die "rpm: --size-mib must be a whole number"
  local payload
  payload=$(payload_macro "$compress")
  if ((no_binary)); then
    ((!symlink)) || die "rpm: --binary-symlink and --no-binary exclude each other"
  else
    [[ -n "$binary" && -f "$binary" ]] || die "rpm: --binary FILE (an existing file) or --no-binary"
    binary=$(abspath "$binary")
  fi
  make_scratch
  # The key is needed for repomd.xml.asc even when the package stays unsigned.
  use_key "$keydir"

  local top="$scratch/rpmbuild" have=0
  mkdir -p "$top"/{BUILD,BUILDROOT,RPMS,SOURCES,SPECS,SRPMS}
  if ((!no_binary)); then have=$(stat -c %s "$binary"); fi
  local pad_bytes=$((size_mib * 1048576 - have))
  ((pad_bytes > 0)) || pad_bytes=0
  {
    cat <<'EOF'
Name:           aks-node-controller
Version:        %{lp_version}
Release:        %{lp_release}
Summary:        AKS node controller (test package)
License:        MIT
URL:            https://github.com/Azure/AgentBaker
AutoReqProv:    no

%description
Built by tests/support/make-signed-repo.sh for the repository fast path's tests.

%prep
%build

%install
mkdir -p %{buildroot}/usr/bin %{buildroot}/usr/share/doc/aks-node-controller
echo "AKS node controller (test package)" > %{buildroot}/usr/share/doc/aks-node-controller/README
EOF
    if ((no_binary)); then
      :
    elif ((symlink)); then
      echo 'install -D -m 0755 "%{lp_binary}" %{buildroot}/usr/lib/aks-node-controller/aks-node-controller'
      echo 'ln -s ../lib/aks-node-controller/aks-node-controller %{buildroot}/usr/bin/aks-node-controller'
    else
      echo 'install -m 0755 "%{lp_binary}" %{buildroot}/usr/bin/aks-node-controller'
    fi
    if ((pad_bytes > 0)); then
      echo 'mkdir -p %{buildroot}/usr/share/aks-node-controller'
      echo "head -c $pad_bytes /dev/urandom > %{buildroot}/usr/share/aks-node-controller/padding.bin"
    fi
    echo
    echo '%files'
    echo '%defattr(-,root,root,-)'
    echo '/usr/share/doc/aks-node-controller/README'
    if ((no_binary)); then
      :
    elif ((symlink)); then
      echo '/usr/bin/aks-node-controller'
      echo '%attr(0755,root,root) /usr/lib/aks-node-controller/aks-node-controller'
    else
      echo '%attr(0755,root,root) /usr/bin/aks-node-controller'
    fi
    if ((pad_bytes > 0)); then echo '/usr/share/aks-node-controller/padding.bin'; fi
  } >"$top/SPECS/aks-node-controller.spec"

  local name="aks-node-controller-$version-$release.$arch.rpm"
  # --target: any architecture on any host; the binary is prebuilt, so everything that would
  # post-process it (strip, debuginfo, build-id links, brp-* scripts) is off.
  rpmbuild -bb --quiet --target "$arch" \
    --define "_topdir $top" \
    --define "_rpmfilename %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
    --define "_build_id_links none" \
    --define "debug_package %{nil}" \
    --define "__os_install_post %{nil}" \
    --define "__strip /bin/true" \
    --define "_binary_payload $payload" \
    --define "_buildhost aks-live-patching.test" \
    --define "lp_version $version" \
    --define "lp_release $release" \
    --define "lp_binary ${binary:-/dev/null}" \
    "$top/SPECS/aks-node-controller.spec" >"$scratch/rpmbuild.log" 2>&1 || {
    cat "$scratch/rpmbuild.log" >&2
    die "rpm: rpmbuild failed"
  }
  [[ -f "$top/RPMS/$name" ]] || die "rpm: rpmbuild made no $name"
  if ((!unsigned)); then
    # Debian's rpm names /usr/bin/gpg2, which Debian does not ship: __gpg says gpg.
    rpmsign --addsign \
      --define "__gpg $(command -v gpg)" \
      --define "_gpg_path $gpg_home" \
      --define "_gpg_name $key_fpr" \
      --define "_gpg_sign_cmd_extra_args --batch --no-tty --pinentry-mode loopback" \
      "$top/RPMS/$name" >"$scratch/rpmsign.log" 2>&1 || {
      cat "$scratch/rpmsign.log" >&2
      die "rpm: rpmsign failed"
    }
  fi
  mkdir -p "$repo/Packages/a"
  mv "$top/RPMS/$name" "$repo/Packages/a/$name"
  # createrepo_c 0.17 compresses primary/filelists/other with gz by default (--compress-type
  # is only the sqlite databases'); said explicitly, since newer versions default to zstd,
  # which the node does not read. No sqlite databases: dnf does not need them, and they
  # cost a third of the time.
  createrepo_c --quiet --no-database --general-compress-type=gz "$repo" \
    >"$scratch/createrepo.log" 2>&1 || {
    cat "$scratch/createrepo.log" >&2
    die "rpm: createrepo_c failed"
  }
  sign_repomd "$repo"
  abspath "$repo/Packages/a/$name"
}

# --- rpmdb ---------------------------------------------------------------------------------
cmd_rpmdb() {
  (($# >= 1)) || die "usage: $prog rpmdb DBDIR --key KEYDIR"
  local db keydir=""
  db=$(abspath "$1")
  shift
  while (($#)); do
    case $1 in
      --key) need "$@"; keydir=$2; shift 2 ;;
      *) die "rpmdb: unknown option $1" ;;
    esac
  done
  [[ -f "$keydir/keyring.asc" ]] || die "rpmdb: no $keydir/keyring.asc"
  make_scratch
  mkdir -p "$db"
  rpmdb --dbpath "$db" --initdb
  rpmkeys --dbpath "$db" --import "$keydir/keyring.asc"
  echo "$db"
}

# --- resign --------------------------------------------------------------------------------
cmd_resign() {
  (($# >= 1)) || die "usage: $prog resign REPO_DIR --key KEYDIR [--suite S] [--regz] [--primary FILE]"
  local repo=$1 keydir="" suite="" regz=0 primary=""
  shift
  while (($#)); do
    case $1 in
      --key) need "$@"; keydir=$2; shift 2 ;;
      --suite) need "$@"; suite=$2; shift 2 ;;
      --regz) regz=1; shift ;;
      --primary) need "$@"; primary=$2; shift 2 ;;
      *) die "resign: unknown option $1" ;;
    esac
  done
  make_scratch
  use_key "$keydir"
  if [[ -d "$repo/dists" ]]; then
    if [[ -z "$suite" ]]; then
      local -a suites
      mapfile -t suites < <(find "$repo/dists" -mindepth 1 -maxdepth 1 -type d -printf '%f\n')
      ((${#suites[@]} == 1)) || die "resign: ${#suites[@]} suites in $repo/dists: say --suite"
      suite=${suites[0]}
    fi
    if ((regz)); then
      local p
      while IFS= read -r p; do
        if [[ -f "$p.gz" ]]; then gzip -9 -n -c "$p" >"$p.gz"; fi
      done < <(find "$repo/dists/$suite" -name Packages -type f)
    fi
    sign_deb_suite "$repo" "$suite"
  elif [[ -d "$repo/repodata" ]]; then
    if [[ -n "$primary" ]]; then
      [[ -f "$primary" ]] || die "resign: no $primary"
      # modifyrepo_c names the new file after its input: primary.xml -> <sha>-primary.xml.gz.
      cp "$primary" "$scratch/primary.xml"
      local old
      old=$(sed -n '/<data type="primary">/,/<\/data>/s/.*<location href="\([^"]*\)".*/\1/p' \
        "$repo/repodata/repomd.xml")
      modifyrepo_c --mdtype=primary --compress-type=gz "$scratch/primary.xml" \
        "$repo/repodata" >"$scratch/modifyrepo.log" 2>&1 || {
        cat "$scratch/modifyrepo.log" >&2
        die "resign: modifyrepo_c failed"
      }
      local now
      now=$(sed -n '/<data type="primary">/,/<\/data>/s/.*<location href="\([^"]*\)".*/\1/p' \
        "$repo/repodata/repomd.xml")
      if [[ -n "$old" && "$old" != "$now" ]]; then rm -f "${repo:?}/$old"; fi
    fi
    sign_repomd "$repo"
  else
    die "resign: $repo has neither dists/ nor repodata/"
  fi
}

# --- aptsource / yumrepo -------------------------------------------------------------------
cmd_aptsource() {
  (($# >= 1)) || die "usage: $prog aptsource FILE --uri URI [options] (see the header)"
  local file=$1 uri="" suite=stable component=main format=""
  local -a signed_by=() archs=()
  shift
  while (($#)); do
    case $1 in
      --uri) need "$@"; uri=$2; shift 2 ;;
      --suite) need "$@"; suite=$2; shift 2 ;;
      --component) need "$@"; component=$2; shift 2 ;;
      --signed-by) need "$@"; signed_by+=("$2"); shift 2 ;;
      --arch) need "$@"; archs+=("$2"); shift 2 ;;
      --format) need "$@"; format=$2; shift 2 ;;
      *) die "aptsource: unknown option $1" ;;
    esac
  done
  [[ -n "$uri" ]] || die "aptsource: --uri is required"
  if [[ -z "$format" ]]; then
    case $file in *.sources) format=sources ;; *) format=list ;; esac
  fi
  mkdir -p "$(dirname "$file")"
  local IFS=,
  case $format in
    list)
      local opts=()
      if ((${#archs[@]})); then opts+=("arch=${archs[*]}"); fi
      if ((${#signed_by[@]})); then opts+=("signed-by=${signed_by[*]}"); fi
      if ((${#opts[@]})); then
        IFS=' '
        echo "deb [${opts[*]}] $uri $suite $component" >"$file"
      else
        echo "deb $uri $suite $component" >"$file"
      fi
      ;;
    sources)
      {
        echo "Types: deb"
        echo "URIs: $uri"
        echo "Suites: $suite"
        echo "Components: $component"
        IFS=' '
        if ((${#archs[@]})); then echo "Architectures: ${archs[*]}"; fi
        if ((${#signed_by[@]})); then echo "Signed-By: ${signed_by[*]}"; fi
      } >"$file"
      ;;
    *) die "aptsource: unknown --format $format" ;;
  esac
}

cmd_yumrepo() {
  (($# >= 1)) || die "usage: $prog yumrepo FILE --baseurl URL [options] (see the header)"
  local file=$1 baseurl="" section=azurelinux-official-ms-oss enabled=1 gpgcheck=1
  local -a gpgkeys=()
  shift
  while (($#)); do
    case $1 in
      --baseurl) need "$@"; baseurl=$2; shift 2 ;;
      --section) need "$@"; section=$2; shift 2 ;;
      --gpgkey) need "$@"; gpgkeys+=("$2"); shift 2 ;;
      --enabled) need "$@"; enabled=$2; shift 2 ;;
      --gpgcheck) need "$@"; gpgcheck=$2; shift 2 ;;
      *) die "yumrepo: unknown option $1" ;;
    esac
  done
  [[ -n "$baseurl" ]] || die "yumrepo: --baseurl is required"
  mkdir -p "$(dirname "$file")"
  {
    echo "[$section]"
    echo "name=$section (test)"
    echo "baseurl=$baseurl"
    if ((${#gpgkeys[@]})); then echo "gpgkey=${gpgkeys[*]}"; fi
    echo "gpgcheck=$gpgcheck"
    echo "repo_gpgcheck=1"
    echo "enabled=$enabled"
    echo "skip_if_unavailable=True"
    echo "sslverify=1"
  } >"$file"
}

# --- main ----------------------------------------------------------------------------------
usage() { sed -n '/^# usage:/,/^# What a test edits/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

(($#)) || {
  usage >&2
  exit 2
}
command=$1
shift
case $command in
  key) cmd_key "$@" ;;
  deb) cmd_deb "$@" ;;
  rpm) cmd_rpm "$@" ;;
  rpmdb) cmd_rpmdb "$@" ;;
  resign) cmd_resign "$@" ;;
  aptsource) cmd_aptsource "$@" ;;
  yumrepo) cmd_yumrepo "$@" ;;
  -h | --help | help) usage ;;
  *) die "unknown subcommand $command (key, deb, rpm, rpmdb, resign, aptsource, yumrepo)" ;;
esac
