// Real signed package repositories for the repository fast path's tests: a throwaway OpenPGP
// key, an apt repository (InRelease, Packages[.gz], pool/...deb) and a yum repository
// (repomd.xml + .asc, a gzip'ed primary, Packages/a/...rpm), made by Debian's own tools
// (gpg, dpkg-deb, apt-ftparchive, rpmbuild, rpmsign, createrepo_c) through
// tests/support/make-signed-repo.sh, the one implementation the demo and the benchmark run
// too (its header says which file a test edits for each tampering case). Serve a
// repository with StaticHttpServer (static_http_server.h).
//
//   TempDir dir;
//   SigningKey key = MakeSigningKey(dir.File("key"));
//   DebRepoOptions deb;
//   deb.version = "202608.26.2";  // deb.ubuntu_version = "22.04", deb.arch = "amd64"
//   std::filesystem::path pkg = BuildDebRepo(dir.File("repo"), key, deb);
//   // dir/repo/dists/jammy/InRelease (DebSuiteDir), .../main/binary-amd64/Packages[.gz]
//
// Every function throws std::runtime_error with the script's exit status and stderr when it
// fails, which fails the calling test with the tool's own words.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace hotfix::testsupport {

// <source dir>/tests/support/make-signed-repo.sh, the source dir being $LP_SOURCE_DIR (every
// test has it) or the one this library was built from.
std::filesystem::path SignedRepoScript();

// Runs the script with these arguments (a subcommand first) and returns its stdout; throws
// std::runtime_error with the exit status and stderr when it does not succeed in time.
std::string RunSignedRepoScript(const std::vector<std::string>& args,
                                std::chrono::milliseconds timeout = std::chrono::minutes(5));

struct SigningKey {
  std::filesystem::path dir;          // holds gnupg/ (a private GNUPGHOME), the files below
  std::filesystem::path keyring_gpg;  // dir/keyring.gpg: binary, for gpgv --keyring
  std::filesystem::path keyring_asc;  // dir/keyring.asc: armored (Signed-By may name either)
  std::string fingerprint;            // 40 upper-case hex digits
};

enum class KeyAlgorithm { kEd25519, kRsa3072 };

// A new key without a passphrase in dir (created; a key already there is replaced). Ed25519
// takes ~0.1 s; RSA ~0.5 s, for a test that wants the RSA production keys' kind.
SigningKey MakeSigningKey(const std::filesystem::path& dir,
                          KeyAlgorithm algorithm = KeyAlgorithm::kEd25519);

// What usr/bin/aks-node-controller is in the package.
enum class BinaryMember {
  kRegularFile,  // the binary, mode 0755
  kSymlink,      // a symlink to ../lib/aks-node-controller/aks-node-controller (the binary)
  kAbsent,       // no such member (only a README)
};

// The package's payload compression. gzip (level 1) is the default: fast, and read
// everywhere. xz takes ~25 s for a 40 MiB package on two cores.
enum class PackageCompression { kGzip, kXz, kZstd, kNone };

struct DebRepoOptions {
  std::string version;                   // the hotfix version, e.g. "202608.26.2"
  std::string ubuntu_version = "22.04";  // VERSION_ID: the package is <version>-ubuntu<this>u1
  std::string arch = "amd64";
  // The binary to ship; empty: a small shell script that prints "aks-node-controller
  // <version>" (what the node cares about is the bytes, not that it runs).
  std::filesystem::path binary;
  BinaryMember member = BinaryMember::kRegularFile;
  std::string suite;  // empty: DebSuite() (the Ubuntu codename, else "stable")
  std::string component = "main";
  bool gzip_index = true;  // Packages.gz next to Packages (and listed in InRelease)
  int size_mib = 0;        // pad the package to about this size with random bytes
  PackageCompression compression = PackageCompression::kGzip;
  std::string package = "aks-node-controller";
};

// The suite the options build: options.suite, else the codename of the Ubuntu version
// (20.04 focal, 22.04 jammy, 24.04 noble), else "stable" (as the script decides).
std::string DebSuite(const DebRepoOptions& options);
// repo/dists/<suite>: InRelease, Release, Release.gpg.
std::filesystem::path DebSuiteDir(const std::filesystem::path& repo, const DebRepoOptions& options);
// repo/dists/<suite>/<component>/binary-<arch>: Packages and Packages.gz.
std::filesystem::path DebIndexDir(const std::filesystem::path& repo, const DebRepoOptions& options);

// Adds the package to the apt repository at repo (created if need be), rewrites the suite's
// indices from every package in pool/ and signs them. Returns the .deb's path
// (repo/pool/main/a/aks-node-controller/aks-node-controller_<ver>_<arch>.deb).
std::filesystem::path BuildDebRepo(const std::filesystem::path& repo, const SigningKey& key,
                                   const DebRepoOptions& options);

struct RpmRepoOptions {
  std::string version;           // the hotfix version
  std::string arch = "x86_64";   // or "aarch64": any on any host
  std::filesystem::path binary;  // empty: as for DebRepoOptions
  BinaryMember member = BinaryMember::kRegularFile;
  bool sign = true;  // false: no signature in the package (repomd.xml is signed anyway)
  int size_mib = 0;
  std::string release = "1.azl3";
  PackageCompression compression = PackageCompression::kGzip;
};

// Adds the package to the yum repository at repo (created if need be), runs createrepo_c
// (primary gzip'ed) and signs repomd.xml. Returns the .rpm's path
// (repo/Packages/a/aks-node-controller-<version>-<release>.<arch>.rpm).
std::filesystem::path BuildRpmRepo(const std::filesystem::path& repo, const SigningKey& key,
                                   const RpmRepoOptions& options);

// repo/<repomd.xml's location href of the primary> (repodata/<sha256>-primary.xml.gz).
std::filesystem::path RpmPrimaryPath(const std::filesystem::path& repo);

// A private rpm database at dir with the key imported, for `rpmkeys --dbpath dir`. Returns
// its absolute path.
std::filesystem::path MakeRpmDb(const std::filesystem::path& dir, const SigningKey& key);

// After a test changed signed metadata on purpose: the deb repository's Release, InRelease
// and Release.gpg from the index files as they are now (regzip: first each Packages.gz from
// the Packages beside it; suite empty: the only one).
void ResignDebRepo(const std::filesystem::path& repo, const SigningKey& key,
                   std::string_view suite = {}, bool regzip = false);
// The rpm repository's repomd.xml.asc again; with edited_primary (an uncompressed
// primary.xml) that primary replaces the repository's first (new name, sizes, checksums).
void ResignRpmRepo(const std::filesystem::path& repo, const SigningKey& key,
                   const std::filesystem::path& edited_primary = {});

struct AptSourceOptions {
  std::string uri;  // "http://127.0.0.1:<port>/"
  std::string suite = "jammy";
  std::string component = "main";
  std::vector<std::string> signed_by;  // paths (or, for a negative test, anything)
  std::vector<std::string> archs;
};
// file ending in .list: one `deb [arch=... signed-by=...] URI suite component` line;
// .sources: a deb822 paragraph.
void WriteAptSource(const std::filesystem::path& file, const AptSourceOptions& options);

struct YumRepoOptions {
  std::string baseurl;
  std::string section = "azurelinux-official-ms-oss";
  std::vector<std::string> gpgkeys;  // "file:///.../keyring.asc"
  bool enabled = true;
};
void WriteYumRepo(const std::filesystem::path& file, const YumRepoOptions& options);

}  // namespace hotfix::testsupport
