// The repository fixtures the fast path's tests stand on (tests/support/signed_repo.h,
// static_http_server.h, make-signed-repo.sh), checked the way a client checks them, with the
// real tools: gpgv on InRelease and repomd.xml, the signed sizes and SHA-256s of the indices,
// the package's member, rpmkeys --checksig against a private rpm database, and every file
// fetched over HTTP from nginx and seen in its access log.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/openssl.h"
#include "signed_repo.h"
#include "static_http_server.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "text_util.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kToolTimeout = std::chrono::seconds(60);
constexpr char kVersion[] = "202608.26.2";

RunResult RunTool(std::vector<std::string> argv) {
  SpawnOptions spawn;
  spawn.argv = std::move(argv);
  return RunProcess(std::move(spawn), kToolTimeout);
}

std::string Describe(const RunResult& run) {
  return run.status.ToString() + "\nstdout:\n" + run.stdout_text + "\nstderr:\n" + run.stderr_text;
}

std::string Sha256Of(const std::filesystem::path& path) {
  return ossl::Sha256Hex(ReadFileOrThrow(path));
}

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void ReportTime(const std::string& what, double ms) {
  std::cout << "[ timing   ] " << what << ": " << static_cast<int64_t>(ms) << " ms" << std::endl;
  ::testing::Test::RecordProperty(what, static_cast<int>(ms));
}

// The clear-signed text of an InRelease file (between the armor header's blank line and the
// signature), dash-escaping undone: what the node reads after gpgv.
std::string SignedText(const std::string& inrelease) {
  size_t start = inrelease.find("\n\n");
  size_t end = inrelease.find("-----BEGIN PGP SIGNATURE-----");
  if (start == std::string::npos || end == std::string::npos || end < start) return "";
  std::istringstream in(inrelease.substr(start + 2, end - start - 2));
  std::string line, text;
  while (std::getline(in, line)) {
    if (line.rfind("- ", 0) == 0) line.erase(0, 2);
    text += line + "\n";
  }
  return text;
}

struct SignedFile {
  std::string sha256;
  uint64_t size = 0;
};

// The SHA256: section of a Release text, path -> hash and size.
std::map<std::string, SignedFile> Sha256Section(const std::string& release) {
  std::map<std::string, SignedFile> files;
  std::istringstream in(release);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') {
      inside = line == "SHA256:";
      continue;
    }
    if (!inside) continue;
    std::istringstream fields(line);
    SignedFile file;
    std::string path;
    fields >> file.sha256 >> file.size >> path;
    files[path] = file;
  }
  return files;
}

// The stanza of Packages text whose Version is version, as key -> value.
std::map<std::string, std::string> Stanza(const std::string& packages, const std::string& version) {
  std::istringstream in(packages);
  std::string line;
  std::map<std::string, std::string> stanza;
  auto done = [&] {
    auto it = stanza.find("Version");
    return it != stanza.end() && it->second == version;
  };
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (done()) return stanza;
      stanza.clear();
      continue;
    }
    size_t colon = line.find(": ");
    if (line[0] != ' ' && colon != std::string::npos) {
      stanza[line.substr(0, colon)] = line.substr(colon + 2);
    }
  }
  return done() ? stanza : std::map<std::string, std::string>{};
}

// `tar -tv` of the package's data (dpkg-deb --fsys-tarfile, as the node reads it).
std::string DebListing(const std::filesystem::path& deb, const TempDir& scratch) {
  SpawnOptions spawn;
  spawn.argv = {"dpkg-deb", "--fsys-tarfile", deb.string()};
  spawn.stdout_path = scratch.File("data.tar");
  RunResult tar = RunProcess(std::move(spawn), kToolTimeout);
  EXPECT_TRUE(tar.status.success()) << Describe(tar);
  RunResult list = RunTool({"tar", "-tvf", scratch.File("data.tar").string()});
  EXPECT_TRUE(list.status.success()) << Describe(list);
  return list.stdout_text;
}

// One member of a newc cpio archive (rpm2cpio's output).
struct CpioMember {
  uint32_t mode = 0;
  std::string data;
};

std::map<std::string, CpioMember> ParseNewc(const std::string& archive) {
  std::map<std::string, CpioMember> members;
  size_t at = 0;
  auto field = [&](size_t index) {
    return static_cast<uint32_t>(std::stoul(archive.substr(at + 6 + index * 8, 8), nullptr, 16));
  };
  while (at + 110 <= archive.size() && archive.compare(at, 6, "070701") == 0) {
    uint32_t mode = field(1);
    uint32_t file_size = field(6);
    uint32_t name_size = field(11);
    std::string name = archive.substr(at + 110, name_size - 1);
    size_t data = (at + 110 + name_size + 3) & ~size_t{3};
    if (name == "TRAILER!!!") break;
    members[name] = {mode, archive.substr(data, file_size)};
    at = (data + file_size + 3) & ~size_t{3};
  }
  return members;
}

// GETs url with curl into out; the body, or a failure.
void Fetch(const std::string& url, const std::filesystem::path& out) {
  RunResult curl = RunTool({"curl", "-fsS", "--noproxy", "*", "-o", out.string(), url});
  ASSERT_TRUE(curl.status.success()) << url << ": " << Describe(curl);
}

TEST(RepositoryFixtureTest, DebRepositoryVerifiesWithTheRealTools) {
  TempDir dir("lp-deb-fixture");
  auto start = std::chrono::steady_clock::now();
  SigningKey key = MakeSigningKey(dir.File("key"));
  ReportTime("signing key (ed25519)", MillisecondsSince(start));
  SigningKey other = MakeSigningKey(dir.File("other-key"));
  EXPECT_THAT(key.fingerprint, ::testing::MatchesRegex("[0-9A-F]{40}"));
  EXPECT_NE(key.fingerprint, other.fingerprint);

  std::filesystem::path binary = dir.Write("anc", "#!/bin/sh\necho fixture\n", 0755);
  DebRepoOptions options;
  options.version = kVersion;
  options.ubuntu_version = "24.04";
  options.binary = binary;
  std::filesystem::path repo = dir.File("repo");
  start = std::chrono::steady_clock::now();
  std::filesystem::path deb = BuildDebRepo(repo, key, options);
  ReportTime("deb repository", MillisecondsSince(start));
  EXPECT_EQ(deb, std::filesystem::absolute(repo / "pool/main/a/aks-node-controller/"
                                                  "aks-node-controller_202608.26.2-ubuntu24.04u1_"
                                                  "amd64.deb"));
  // A second version for another architecture in the same repository.
  DebRepoOptions arm = options;
  arm.version = "202608.26.3";
  arm.arch = "arm64";
  start = std::chrono::steady_clock::now();
  std::filesystem::path arm_deb = BuildDebRepo(repo, key, arm);
  ReportTime("deb repository, second package", MillisecondsSince(start));

  std::filesystem::path suite = DebSuiteDir(repo, options);
  EXPECT_EQ(suite, repo / "dists" / "noble");
  std::filesystem::path inrelease = suite / "InRelease";
  RunResult good = RunTool({"gpgv", "--keyring", key.keyring_gpg.string(), inrelease.string()});
  EXPECT_TRUE(good.status.success()) << Describe(good);
  EXPECT_THAT(good.stderr_text, HasSubstr("Good signature"));
  RunResult bad = RunTool({"gpgv", "--keyring", other.keyring_gpg.string(), inrelease.string()});
  EXPECT_FALSE(bad.status.success()) << Describe(bad);
  RunResult detached = RunTool({"gpgv", "--keyring", key.keyring_gpg.string(),
                                (suite / "Release.gpg").string(), (suite / "Release").string()});
  EXPECT_TRUE(detached.status.success()) << Describe(detached);

  std::string text = SignedText(ReadFileOrThrow(inrelease));
  EXPECT_EQ(text, ReadFileOrThrow(suite / "Release"));
  EXPECT_THAT(text, HasSubstr("Suite: noble\n"));
  EXPECT_THAT(text, HasSubstr("Architectures: amd64 arm64\n"));
  std::map<std::string, SignedFile> signed_files = Sha256Section(text);
  for (const char* arch : {"amd64", "arm64"}) {
    for (const char* name : {"Packages", "Packages.gz"}) {
      std::string path = std::string("main/binary-") + arch + "/" + name;
      ASSERT_EQ(signed_files.count(path), 1u) << path << " in\n" << text;
      EXPECT_EQ(signed_files[path].sha256, Sha256Of(suite / path)) << path;
      EXPECT_EQ(signed_files[path].size, std::filesystem::file_size(suite / path)) << path;
    }
  }
  RunResult gunzip =
      RunTool({"gzip", "-dc", (DebIndexDir(repo, options) / "Packages.gz").string()});
  ASSERT_TRUE(gunzip.status.success()) << Describe(gunzip);
  EXPECT_EQ(gunzip.stdout_text, ReadFileOrThrow(DebIndexDir(repo, options) / "Packages"));

  std::map<std::string, std::string> stanza =
      Stanza(ReadFileOrThrow(DebIndexDir(repo, options) / "Packages"), "202608.26.2-ubuntu24.04u1");
  ASSERT_FALSE(stanza.empty());
  EXPECT_EQ(stanza["Package"], "aks-node-controller");
  EXPECT_EQ(stanza["Architecture"], "amd64");
  EXPECT_EQ(
      stanza["Filename"],
      "pool/main/a/aks-node-controller/aks-node-controller_202608.26.2-ubuntu24.04u1_amd64.deb");
  EXPECT_EQ(stanza["SHA256"], Sha256Of(deb));
  EXPECT_EQ(stanza["Size"], std::to_string(std::filesystem::file_size(deb)));
  EXPECT_FALSE(
      Stanza(ReadFileOrThrow(DebIndexDir(repo, arm) / "Packages"), "202608.26.3-ubuntu24.04u1")
          .empty());

  std::string listing = DebListing(deb, dir);
  EXPECT_THAT(listing, ::testing::ContainsRegex(
                           "-rwxr-xr-x root/root +[0-9]+ [^\n]* ./usr/bin/aks-node-controller\n"));
  RunResult member =
      RunTool({"tar", "-xOf", dir.File("data.tar").string(), "./usr/bin/aks-node-controller"});
  EXPECT_EQ(member.stdout_text, ReadFileOrThrow(binary));
  EXPECT_THAT(DebListing(arm_deb, dir), HasSubstr("./usr/bin/aks-node-controller"));

  // Over HTTP from nginx, every file seen in its access log.
  StaticHttpServer server(repo);
  std::vector<std::string> paths = {
      "/dists/noble/InRelease", "/dists/noble/main/binary-amd64/Packages.gz",
      "/dists/noble/main/binary-amd64/Packages",
      "/pool/main/a/aks-node-controller/aks-node-controller_202608.26.2-ubuntu24.04u1_amd64.deb"};
  for (const std::string& path : paths) {
    std::filesystem::path out = dir.File("fetched");
    Fetch(server.Url(path), out);
    EXPECT_EQ(ReadFileOrThrow(out), ReadFileOrThrow(repo / path.substr(1))) << path;
  }
  RunResult missing = RunTool({"curl", "-sS", "--noproxy", "*", "-o", "/dev/null", "-w",
                               "%{http_code}", server.Url("dists/noble/Release.missing")});
  EXPECT_EQ(missing.stdout_text, "404");
  EXPECT_EQ(server.RequestedPaths(),
            (std::vector<std::string>{paths[0], paths[1], paths[2], paths[3],
                                      "/dists/noble/Release.missing"}));
  std::vector<AccessLogEntry> requests = server.Requests();
  ASSERT_EQ(requests.size(), 5u) << server.AccessLog();
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].status, 200);
  EXPECT_EQ(requests[0].remote_addr, "127.0.0.1");
  EXPECT_THAT(requests[0].user_agent, HasSubstr("curl/"));
  EXPECT_EQ(requests[3].body_bytes, std::filesystem::file_size(deb));
  EXPECT_EQ(requests[4].status, 404);
  EXPECT_EQ(server.CountRequests(paths[0]), 1);
  server.ClearAccessLog();
  EXPECT_TRUE(server.Requests().empty());
}

TEST(RepositoryFixtureTest, DebMemberVariantsAndPlainPackagesIndex) {
  TempDir dir("lp-deb-variants");
  SigningKey key = MakeSigningKey(dir.File("key"));
  DebRepoOptions options;
  options.version = kVersion;
  options.member = BinaryMember::kSymlink;
  options.gzip_index = false;
  std::filesystem::path repo = dir.File("repo");
  std::filesystem::path symlink_deb = BuildDebRepo(repo, key, options);
  EXPECT_THAT(DebListing(symlink_deb, dir),
              ::testing::ContainsRegex("lrwxrwxrwx root/root [^\n]* ./usr/bin/aks-node-controller "
                                       "-> ../lib/aks-node-controller/aks-node-controller\n"));
  options.version = "202608.26.4";
  options.member = BinaryMember::kAbsent;
  std::filesystem::path absent_deb = BuildDebRepo(repo, key, options);
  EXPECT_THAT(DebListing(absent_deb, dir), Not(HasSubstr("aks-node-controller\n")));

  // --no-gz: only Packages, and only it is signed.
  std::filesystem::path suite = DebSuiteDir(repo, options);
  EXPECT_EQ(suite, repo / "dists" / "jammy");
  EXPECT_FALSE(std::filesystem::exists(DebIndexDir(repo, options) / "Packages.gz"));
  std::string text = SignedText(ReadFileOrThrow(suite / "InRelease"));
  EXPECT_THAT(text, HasSubstr("main/binary-amd64/Packages\n"));
  EXPECT_THAT(text, Not(HasSubstr("Packages.gz")));

  // A test's own edit, signed again: the signature holds, the signed hash is the new file's.
  std::filesystem::path packages = DebIndexDir(repo, options) / "Packages";
  std::string edited = std::regex_replace(ReadFileOrThrow(packages), std::regex("Filename: pool/"),
                                          "Filename: elsewhere/");
  dir.Write("Packages.edited", edited);
  std::filesystem::copy_file(dir.File("Packages.edited"), packages,
                             std::filesystem::copy_options::overwrite_existing);
  ResignDebRepo(repo, key);
  RunResult good =
      RunTool({"gpgv", "--keyring", key.keyring_gpg.string(), (suite / "InRelease").string()});
  EXPECT_TRUE(good.status.success()) << Describe(good);
  std::map<std::string, SignedFile> signed_files =
      Sha256Section(SignedText(ReadFileOrThrow(suite / "InRelease")));
  EXPECT_EQ(signed_files["main/binary-amd64/Packages"].sha256, ossl::Sha256Hex(edited));
}

TEST(RepositoryFixtureTest, RpmRepositoryVerifiesWithTheRealTools) {
  TempDir dir("lp-rpm-fixture");
  SigningKey key = MakeSigningKey(dir.File("key"));
  SigningKey other = MakeSigningKey(dir.File("other-key"));
  std::filesystem::path binary = dir.Write("anc", "#!/bin/sh\necho fixture\n", 0755);
  RpmRepoOptions options;
  options.version = kVersion;
  options.binary = binary;
  std::filesystem::path repo = dir.File("repo");
  auto start = std::chrono::steady_clock::now();
  std::filesystem::path rpm = BuildRpmRepo(repo, key, options);
  ReportTime("rpm repository (signed)", MillisecondsSince(start));
  EXPECT_EQ(rpm, std::filesystem::absolute(
                     repo / "Packages/a/aks-node-controller-202608.26.2-1.azl3.x86_64.rpm"));
  RpmRepoOptions unsigned_options = options;
  unsigned_options.version = "202608.26.3";
  unsigned_options.arch = "aarch64";  // a foreign architecture builds too
  unsigned_options.sign = false;
  start = std::chrono::steady_clock::now();
  std::filesystem::path unsigned_rpm = BuildRpmRepo(repo, key, unsigned_options);
  ReportTime("rpm repository, second package (unsigned)", MillisecondsSince(start));
  EXPECT_EQ(unsigned_rpm.filename(), "aks-node-controller-202608.26.3-1.azl3.aarch64.rpm");

  std::filesystem::path repomd = repo / "repodata" / "repomd.xml";
  std::filesystem::path asc = repo / "repodata" / "repomd.xml.asc";
  EXPECT_THAT(ReadFileOrThrow(asc), HasSubstr("-----BEGIN PGP SIGNATURE-----"));
  RunResult good =
      RunTool({"gpgv", "--keyring", key.keyring_gpg.string(), asc.string(), repomd.string()});
  EXPECT_TRUE(good.status.success()) << Describe(good);
  RunResult bad =
      RunTool({"gpgv", "--keyring", other.keyring_gpg.string(), asc.string(), repomd.string()});
  EXPECT_FALSE(bad.status.success()) << Describe(bad);

  // The primary: gzip'ed, its signed size and checksums right, both packages listed.
  std::filesystem::path primary = RpmPrimaryPath(repo);
  EXPECT_THAT(primary.filename().string(), ::testing::EndsWith("-primary.xml.gz"));
  std::string repomd_text = ReadFileOrThrow(repomd);
  std::smatch record;
  ASSERT_TRUE(std::regex_search(
      repomd_text, record,
      std::regex(R"(<data type="primary">\s*<checksum type="sha256">([0-9a-f]{64})</checksum>\s*)"
                 R"(<open-checksum type="sha256">([0-9a-f]{64})</open-checksum>[\s\S]*?)"
                 R"(<size>([0-9]+)</size>\s*<open-size>([0-9]+)</open-size>)")))
      << repomd_text;
  EXPECT_EQ(record[1].str(), Sha256Of(primary));
  EXPECT_EQ(std::stoull(record[3].str()), std::filesystem::file_size(primary));
  RunResult gunzip = RunTool({"gzip", "-dc", primary.string()});
  ASSERT_TRUE(gunzip.status.success()) << Describe(gunzip);
  EXPECT_EQ(record[2].str(), ossl::Sha256Hex(gunzip.stdout_text));
  EXPECT_EQ(std::stoull(record[4].str()), gunzip.stdout_text.size());
  EXPECT_THAT(gunzip.stdout_text,
              HasSubstr("<location href=\"Packages/a/"
                        "aks-node-controller-202608.26.2-1.azl3.x86_64.rpm\"/>"));
  EXPECT_THAT(gunzip.stdout_text,
              HasSubstr("<version epoch=\"0\" ver=\"202608.26.2\" rel=\"1.azl3\"/>"));
  EXPECT_THAT(gunzip.stdout_text, HasSubstr("<checksum type=\"sha256\" pkgid=\"YES\">" +
                                            Sha256Of(rpm) + "</checksum>"));
  EXPECT_THAT(gunzip.stdout_text, HasSubstr("<arch>aarch64</arch>"));

  // The package signature, against private rpm databases only.
  std::filesystem::path db = MakeRpmDb(dir.File("rpmdb"), key);
  std::filesystem::path other_db = MakeRpmDb(dir.File("other-rpmdb"), other);
  auto checksig = [](const std::filesystem::path& db, const std::filesystem::path& package) {
    return RunTool({"rpmkeys", "--dbpath", db.string(), "--define", "_pkgverify_level signature",
                    "--checksig", "--verbose", package.string()});
  };
  RunResult signed_ok = checksig(db, rpm);
  EXPECT_TRUE(signed_ok.status.success()) << Describe(signed_ok);
  RunResult unsigned_fails = checksig(db, unsigned_rpm);
  EXPECT_FALSE(unsigned_fails.status.success()) << Describe(unsigned_fails);
  RunResult other_key_fails = checksig(other_db, rpm);
  EXPECT_FALSE(other_key_fails.status.success()) << Describe(other_key_fails);
  EXPECT_THAT(other_key_fails.stdout_text + other_key_fails.stderr_text, HasSubstr("NOKEY"));

  // The member, as rpm2cpio gives it to the node.
  RunResult cpio = RunTool({"rpm2cpio", rpm.string()});
  ASSERT_TRUE(cpio.status.success()) << Describe(cpio);
  std::map<std::string, CpioMember> members = ParseNewc(cpio.stdout_text);
  ASSERT_EQ(members.count("./usr/bin/aks-node-controller"), 1u);
  EXPECT_EQ(members["./usr/bin/aks-node-controller"].mode, 0100755u);
  EXPECT_EQ(members["./usr/bin/aks-node-controller"].data, ReadFileOrThrow(binary));

  // Over HTTP from nginx.
  StaticHttpServer server(repo);
  std::vector<std::string> paths = {"/repodata/repomd.xml", "/repodata/repomd.xml.asc",
                                    "/" + primary.lexically_relative(repo).string(),
                                    "/" + rpm.lexically_relative(repo).string()};
  for (const std::string& path : paths) {
    std::filesystem::path out = dir.File("fetched");
    Fetch(server.Url(path), out);
    EXPECT_EQ(ReadFileOrThrow(out), ReadFileOrThrow(repo / path.substr(1))) << path;
  }
  EXPECT_EQ(server.RequestedPaths(), paths);
  for (const AccessLogEntry& entry : server.Requests()) EXPECT_EQ(entry.status, 200) << entry.path;
}

TEST(RepositoryFixtureTest, RpmMemberVariantsAndEditedPrimary) {
  TempDir dir("lp-rpm-variants");
  SigningKey key = MakeSigningKey(dir.File("key"), KeyAlgorithm::kRsa3072);
  RpmRepoOptions options;
  options.version = kVersion;
  options.member = BinaryMember::kSymlink;
  std::filesystem::path repo = dir.File("repo");
  std::filesystem::path rpm = BuildRpmRepo(repo, key, options);
  std::filesystem::path db = MakeRpmDb(dir.File("rpmdb"), key);
  RunResult checksig = RunTool({"rpmkeys", "--dbpath", db.string(), "--define",
                                "_pkgverify_level signature", "--checksig", rpm.string()});
  EXPECT_TRUE(checksig.status.success()) << Describe(checksig);
  RunResult cpio = RunTool({"rpm2cpio", rpm.string()});
  std::map<std::string, CpioMember> members = ParseNewc(cpio.stdout_text);
  ASSERT_EQ(members.count("./usr/bin/aks-node-controller"), 1u);
  EXPECT_EQ(members["./usr/bin/aks-node-controller"].mode & 0170000, 0120000u);  // a symlink

  options.version = "202608.26.4";
  options.member = BinaryMember::kAbsent;
  rpm = BuildRpmRepo(repo, key, options);
  cpio = RunTool({"rpm2cpio", rpm.string()});
  EXPECT_EQ(ParseNewc(cpio.stdout_text).count("./usr/bin/aks-node-controller"), 0u);

  // A test's own primary, signed again: a new primary file, repomd.xml still verifies.
  std::filesystem::path before = RpmPrimaryPath(repo);
  RunResult gunzip = RunTool({"gzip", "-dc", before.string()});
  std::string edited = std::regex_replace(gunzip.stdout_text, std::regex("href=\"Packages/a/"),
                                          "href=\"Packages/b/");
  ResignRpmRepo(repo, key, dir.Write("primary.xml", edited));
  std::filesystem::path after = RpmPrimaryPath(repo);
  EXPECT_NE(before, after);
  EXPECT_FALSE(std::filesystem::exists(before));
  RunResult now = RunTool({"gzip", "-dc", after.string()});
  EXPECT_EQ(now.stdout_text, edited);
  RunResult good = RunTool({"gpgv", "--keyring", key.keyring_gpg.string(),
                            (repo / "repodata/repomd.xml.asc").string(),
                            (repo / "repodata/repomd.xml").string()});
  EXPECT_TRUE(good.status.success()) << Describe(good);
}

TEST(RepositoryFixtureTest, StaticServerBindsTheGivenAddressAndTakesExtraConfig) {
  TempDir dir("lp-static-http");
  dir.Write("hello.txt", "hello\n");
  StaticHttpServerOptions options;
  options.root = dir.path();
  options.host = "127.0.0.2";
  options.server_config = "location = /unavailable { return 503; }";
  StaticHttpServer server(options);
  EXPECT_EQ(server.Url("hello.txt"),
            "http://127.0.0.2:" + std::to_string(server.port()) + "/hello.txt");
  RunResult hello = RunTool({"curl", "-fsS", "--noproxy", "*", server.Url("/hello.txt")});
  EXPECT_TRUE(hello.status.success()) << Describe(hello);
  EXPECT_EQ(hello.stdout_text, "hello\n");
  RunResult wrong_address = RunTool({"curl", "-fsS", "--noproxy", "*",
                                     "http://127.0.0.1:" + std::to_string(server.port()) + "/"});
  EXPECT_FALSE(wrong_address.status.success());
  RunResult unavailable = RunTool({"curl", "-sS", "--noproxy", "*", "-o", "/dev/null", "-w",
                                   "%{http_code}", server.Url("unavailable")});
  EXPECT_EQ(unavailable.stdout_text, "503");
  EXPECT_EQ(server.RequestedPaths(), (std::vector<std::string>{"/hello.txt", "/unavailable"}));
  server.Stop();
  EXPECT_FALSE(server.running());
}

// The benchmark's size: run with --gtest_also_run_disabled_tests to time it.
TEST(RepositoryFixtureTest, DISABLED_FortyMebibytePackages) {
  TempDir dir("lp-large-repo");
  SigningKey key = MakeSigningKey(dir.File("key"));
  DebRepoOptions deb;
  deb.version = kVersion;
  deb.size_mib = 40;
  auto start = std::chrono::steady_clock::now();
  std::filesystem::path deb_path = BuildDebRepo(dir.File("deb"), key, deb);
  ReportTime("deb repository, 40 MiB package", MillisecondsSince(start));
  EXPECT_GE(std::filesystem::file_size(deb_path), 40u << 20);
  RpmRepoOptions rpm;
  rpm.version = kVersion;
  rpm.size_mib = 40;
  start = std::chrono::steady_clock::now();
  std::filesystem::path rpm_path = BuildRpmRepo(dir.File("rpm"), key, rpm);
  ReportTime("rpm repository, 40 MiB package", MillisecondsSince(start));
  EXPECT_GE(std::filesystem::file_size(rpm_path), 40u << 20);
}

}  // namespace
}  // namespace hotfix::testsupport
