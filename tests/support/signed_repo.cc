#include "signed_repo.h"

#include <cstdlib>
#include <regex>
#include <stdexcept>
#include <utility>

#include "subprocess.h"
#include "temp_dir.h"
#include "text_util.h"

#ifndef LP_DEFAULT_SOURCE_DIR
#define LP_DEFAULT_SOURCE_DIR "."
#endif

namespace hotfix::testsupport {
namespace {

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

std::string CompressionName(PackageCompression compression) {
  switch (compression) {
    case PackageCompression::kGzip:
      return "gzip";
    case PackageCompression::kXz:
      return "xz";
    case PackageCompression::kZstd:
      return "zstd";
    case PackageCompression::kNone:
      return "none";
  }
  return "gzip";
}

// The package's binary options: --binary FILE (a default one written to scratch when none is
// given), --binary-symlink, --no-binary.
void AddBinaryArgs(const std::filesystem::path& binary, BinaryMember member,
                   const std::string& version, const TempDir& scratch,
                   std::vector<std::string>* args) {
  if (member == BinaryMember::kAbsent) {
    args->push_back("--no-binary");
    return;
  }
  std::filesystem::path file = binary;
  if (file.empty()) {
    file = scratch.Write("aks-node-controller",
                         "#!/bin/sh\necho \"aks-node-controller " + version + "\"\n", 0755);
  }
  args->insert(args->end(), {"--binary", file.string()});
  if (member == BinaryMember::kSymlink) args->push_back("--binary-symlink");
}

}  // namespace

std::filesystem::path SignedRepoScript() {
  const char* dir = std::getenv("LP_SOURCE_DIR");
  std::filesystem::path source = dir != nullptr && *dir != '\0' ? dir : LP_DEFAULT_SOURCE_DIR;
  return source / "tests" / "support" / "make-signed-repo.sh";
}

std::string RunSignedRepoScript(const std::vector<std::string>& args,
                                std::chrono::milliseconds timeout) {
  SpawnOptions spawn;
  spawn.argv = {"bash", SignedRepoScript().string()};
  spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
  RunResult run = RunProcess(std::move(spawn), timeout);
  if (!run.status.success()) {
    std::string command = "make-signed-repo.sh";
    for (const std::string& arg : args) command += " " + arg;
    throw std::runtime_error(command + ": " + run.status.ToString() + "\n" + run.stderr_text);
  }
  return run.stdout_text;
}

SigningKey MakeSigningKey(const std::filesystem::path& dir, KeyAlgorithm algorithm) {
  std::string fingerprint =
      Trim(RunSignedRepoScript({"key", dir.string(), "--algo",
                                algorithm == KeyAlgorithm::kEd25519 ? "ed25519" : "rsa3072"}));
  SigningKey key;
  key.dir = std::filesystem::absolute(dir);
  key.keyring_gpg = key.dir / "keyring.gpg";
  key.keyring_asc = key.dir / "keyring.asc";
  key.fingerprint = Trim(ReadFileOrThrow(key.dir / "fingerprint"));
  if (key.fingerprint != fingerprint) {
    throw std::runtime_error("make-signed-repo.sh key printed " + fingerprint + " but wrote " +
                             key.fingerprint);
  }
  return key;
}

std::string DebSuite(const DebRepoOptions& options) {
  if (!options.suite.empty()) return options.suite;
  if (options.ubuntu_version == "18.04") return "bionic";
  if (options.ubuntu_version == "20.04") return "focal";
  if (options.ubuntu_version == "22.04") return "jammy";
  if (options.ubuntu_version == "24.04") return "noble";
  return "stable";
}

std::filesystem::path DebSuiteDir(const std::filesystem::path& repo,
                                  const DebRepoOptions& options) {
  return repo / "dists" / DebSuite(options);
}

std::filesystem::path DebIndexDir(const std::filesystem::path& repo,
                                  const DebRepoOptions& options) {
  return DebSuiteDir(repo, options) / options.component / ("binary-" + options.arch);
}

std::filesystem::path BuildDebRepo(const std::filesystem::path& repo, const SigningKey& key,
                                   const DebRepoOptions& options) {
  TempDir scratch("lp-deb-binary");
  std::vector<std::string> args = {"deb",         repo.string(),
                                   "--key",       key.dir.string(),
                                   "--version",   options.version,
                                   "--ubuntu",    options.ubuntu_version,
                                   "--arch",      options.arch,
                                   "--suite",     DebSuite(options),
                                   "--component", options.component,
                                   "--size-mib",  std::to_string(options.size_mib),
                                   "--compress",  CompressionName(options.compression),
                                   "--package",   options.package};
  if (!options.gzip_index) args.push_back("--no-gz");
  AddBinaryArgs(options.binary, options.member, options.version, scratch, &args);
  return Trim(RunSignedRepoScript(args));
}

std::filesystem::path BuildRpmRepo(const std::filesystem::path& repo, const SigningKey& key,
                                   const RpmRepoOptions& options) {
  TempDir scratch("lp-rpm-binary");
  std::vector<std::string> args = {"rpm",        repo.string(),
                                   "--key",      key.dir.string(),
                                   "--version",  options.version,
                                   "--arch",     options.arch,
                                   "--release",  options.release,
                                   "--size-mib", std::to_string(options.size_mib),
                                   "--compress", CompressionName(options.compression)};
  if (!options.sign) args.push_back("--unsigned");
  AddBinaryArgs(options.binary, options.member, options.version, scratch, &args);
  return Trim(RunSignedRepoScript(args));
}

std::filesystem::path RpmPrimaryPath(const std::filesystem::path& repo) {
  std::string repomd = ReadFileOrThrow(repo / "repodata" / "repomd.xml");
  static const std::regex kPrimary(R"re(<data type="primary">[\s\S]*?<location href="([^"]+)")re");
  std::smatch match;
  if (!std::regex_search(repomd, match, kPrimary)) {
    throw std::runtime_error("no primary in " + (repo / "repodata" / "repomd.xml").string());
  }
  return repo / match[1].str();
}

std::filesystem::path MakeRpmDb(const std::filesystem::path& dir, const SigningKey& key) {
  return Trim(RunSignedRepoScript({"rpmdb", dir.string(), "--key", key.dir.string()}));
}

void ResignDebRepo(const std::filesystem::path& repo, const SigningKey& key, std::string_view suite,
                   bool regzip) {
  std::vector<std::string> args = {"resign", repo.string(), "--key", key.dir.string()};
  if (!suite.empty()) args.insert(args.end(), {"--suite", std::string(suite)});
  if (regzip) args.push_back("--regz");
  RunSignedRepoScript(args);
}

void ResignRpmRepo(const std::filesystem::path& repo, const SigningKey& key,
                   const std::filesystem::path& edited_primary) {
  std::vector<std::string> args = {"resign", repo.string(), "--key", key.dir.string()};
  if (!edited_primary.empty()) args.insert(args.end(), {"--primary", edited_primary.string()});
  RunSignedRepoScript(args);
}

void WriteAptSource(const std::filesystem::path& file, const AptSourceOptions& options) {
  std::vector<std::string> args = {"aptsource", file.string(), "--uri",       options.uri,
                                   "--suite",   options.suite, "--component", options.component};
  for (const std::string& path : options.signed_by) args.insert(args.end(), {"--signed-by", path});
  for (const std::string& arch : options.archs) args.insert(args.end(), {"--arch", arch});
  RunSignedRepoScript(args);
}

void WriteYumRepo(const std::filesystem::path& file, const YumRepoOptions& options) {
  std::vector<std::string> args = {
      "yumrepo",   file.string(),   "--baseurl", options.baseurl,
      "--section", options.section, "--enabled", options.enabled ? "1" : "0"};
  for (const std::string& key : options.gpgkeys) args.insert(args.end(), {"--gpgkey", key});
  RunSignedRepoScript(args);
}

}  // namespace hotfix::testsupport
