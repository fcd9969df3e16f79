// download-hotfix's repository fast path end to end (AgentBaker #9451 deb, #9505 rpm;
// docs/DOWNLOAD-HOTFIX.md): the real binary against real signed repositories made by Debian's
// own tools (gpg, dpkg-deb, apt-ftparchive, rpmbuild, rpmsign, createrepo_c:
// tests/support/make-signed-repo.sh) and served by a real nginx on loopback, checked by the
// real gpgv, dpkg-deb, rpmkeys (against a private rpm database: --rpm-dbpath) and rpm2cpio.
// The package managers are recording stand-ins first on PATH: the fast path must not run them,
// except when it falls back.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bin_dir.h"
#include "check_hotfix_run.h"
#include "ports.h"
#include "recorded_calls.h"
#include "signed_repo.h"
#include "static_http_server.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "text_util.h"

namespace hotfix::testsupport {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using Json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kRunTimeout = 120s;
constexpr char kHotfix[] = "202604.01.1";
constexpr char kCurrent[] = "202604.01.0";

// The architecture hotfix-agent was built for, in both packaging systems' words.
#if defined(__aarch64__)
constexpr char kDebArch[] = "arm64";
constexpr char kRpmArch[] = "aarch64";
#else
constexpr char kDebArch[] = "amd64";
constexpr char kRpmArch[] = "x86_64";
#endif

int CountOccurrences(std::string_view text, std::string_view needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

std::string RandomBinary() {
  std::mt19937_64 rng(std::random_device{}());
  std::string bytes =
      "\x7f"
      "ELF fake aks-node-controller ";
  for (int i = 0; i < 4096; ++i) bytes.push_back(static_cast<char>(rng()));
  return bytes;
}

class RepositoryFastPathTest : public ::testing::Test {
 protected:
  RepositoryFastPathTest() {
    for (const char* d : {"opt", "usr/bin", "etc/apt/sources.list.d", "etc/apt/trusted.gpg.d",
                          "etc/yum.repos.d", "events", "fakebin", "repo"}) {
      fs::create_directories(node_.File(d));
    }
    vhd_ = node_.Write("opt/aks-node-controller", "#!/bin/sh\necho vhd\n");
    fs::permissions(vhd_, fs::perms(0750));
    binary_ = RandomBinary();
    binary_file_ = node_.Write("built-binary", binary_, 0755);
    key_ = MakeSigningKey(node_.File("key"));
    Pointer(kHotfix);
    // The package managers, should the fast path fall back: they "install" kHotfix.
    Tool("dpkg", "exit 0\n");
    Tool("apt-get", "exit 0\n");
    Tool("dpkg-query", std::string("printf 'installed\\t") + kHotfix + "\\n'\n");
    Tool("dnf", "exit 0\n");
    Tool("rpm", std::string("printf '") + kHotfix + "\\t1.azl3\\n'\n");
    node_.Write("usr/bin/aks-node-controller", "installed by the package manager");
  }

  void Tool(const std::string& name, const std::string& body) {
    fs::path p = node_.Write("fakebin/" + name, std::string(kRecordCall) + body);
    fs::permissions(p, fs::perms(0755));
  }
  void Pointer(const std::string& version) {
    node_.Write("opt/aks-node-controller-hotfix.json",
                std::string(R"({"hotfixes":{"202604.01":")") + version + "\"}}");
  }
  fs::path Hotfix() const { return node_.File("opt/aks-node-controller-hotfix"); }

  // ---- Ubuntu: an apt repository and the node's source for it.
  DebRepoOptions Deb() const {
    DebRepoOptions deb;
    deb.version = kHotfix;
    deb.ubuntu_version = "22.04";
    deb.arch = kDebArch;
    deb.binary = binary_file_;
    return deb;
  }
  fs::path BuildDeb(const DebRepoOptions& deb) {
    return BuildDebRepo(node_.File("repo"), key_, deb);
  }
  void UbuntuNode(const std::string& uri, std::vector<std::string> signed_by,
                  const std::string& source_file = "microsoft-prod.list") {
    node_.Write("etc/os-release",
                "PRETTY_NAME=\"Ubuntu 22.04.5 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\n"
                "ID=ubuntu\nID_LIKE=debian\n");
    AptSourceOptions source;
    source.uri = uri;
    source.suite = "jammy";
    source.signed_by = std::move(signed_by);
    WriteAptSource(node_.File("etc/apt/sources.list.d/" + source_file), source);
  }

  // ---- Azure Linux 3: a yum repository and the node's .repo file for it.
  RpmRepoOptions Rpm() const {
    RpmRepoOptions rpm;
    rpm.version = kHotfix;
    rpm.arch = kRpmArch;
    rpm.binary = binary_file_;
    return rpm;
  }
  // Served as .../azurelinux/3.0/prod/ms-oss/<arch>/, which $releasever and $basearch name.
  fs::path RpmRepoDir() const {
    return node_.File(std::string("repo/azurelinux/3.0/prod/ms-oss/") + kRpmArch);
  }
  fs::path BuildRpm(const RpmRepoOptions& rpm) { return BuildRpmRepo(RpmRepoDir(), key_, rpm); }
  void AzureLinuxNode(const std::string& server_url, std::vector<std::string> gpgkeys) {
    node_.Write("etc/os-release",
                "NAME=\"Microsoft Azure Linux\"\nVERSION=\"3.0.20260304\"\nID=azurelinux\n"
                "VERSION_ID=\"3.0.20260304\"\n");
    YumRepoOptions repo;
    repo.baseurl = server_url + "azurelinux/$releasever/prod/ms-oss/$basearch";
    repo.gpgkeys = std::move(gpgkeys);
    WriteYumRepo(node_.File("etc/yum.repos.d/azurelinux-official-ms-oss.repo"), repo);
    rpm_db_ = MakeRpmDb(node_.File("rpmdb"), key_);
  }

  StaticHttpServer& Serve() {
    server_ = std::make_unique<StaticHttpServer>(node_.File("repo"));
    return *server_;
  }

  RunResult Agent(std::map<std::string, std::string> env = {}) {
    SpawnOptions spawn;
    spawn.argv = {BinDir() + "/hotfix-agent",
                  "download-hotfix",
                  "--hotfix-pointer",
                  node_.File("opt/aks-node-controller-hotfix.json"),
                  "--current-version",
                  kCurrent,
                  "--os-release",
                  node_.File("etc/os-release"),
                  "--apt-sources-dir",
                  node_.File("etc/apt/sources.list.d"),
                  "--apt-trusted-dir",
                  node_.File("etc/apt/trusted.gpg.d"),
                  "--yum-repos-dir",
                  node_.File("etc/yum.repos.d"),
                  "--package-binary",
                  node_.File("usr/bin/aks-node-controller"),
                  "--vhd-binary",
                  vhd_,
                  "--hotfix-binary",
                  Hotfix(),
                  "--node-custom-data",
                  node_.File("opt/nodecustomdata.yml"),
                  "--retry-backoff",
                  "10ms",
                  "--events-dir",
                  node_.File("events"),
                  "--log-file",
                  node_.File("agent.log"),
                  "--no-report"};
    if (!rpm_db_.empty()) spawn.argv.insert(spawn.argv.end(), {"--rpm-dbpath", rpm_db_});
    spawn.env = std::move(env);
    spawn.env["PATH"] = node_.File("fakebin").string() +
                        ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    spawn.env["FAKE_DIR"] = node_.path();
    for (const char* name : {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                             "no_proxy", "ALL_PROXY", "all_proxy"}) {
      if (spawn.env.count(name) == 0) spawn.unset_env.push_back(name);
    }
    return RunProcess(std::move(spawn), kRunTimeout);
  }

  // The stand-ins called, by name.
  std::vector<std::string> Programs() const {
    std::vector<std::string> names;
    for (const auto& call : RecordedCalls(node_.Read("calls"))) names.push_back(call[0]);
    return names;
  }
  std::string Log() const { return node_.Read("agent.log"); }
  std::string EventMessage() const {
    std::vector<Json> events = ReadEventFiles(node_.File("events"));
    EXPECT_EQ(events.size(), 1u);
    return events.empty() ? "" : events[0]["Message"].get<std::string>();
  }
  // Nothing of the fast path's work is left in the staging folder.
  void ExpectNoLeftovers() const {
    for (const auto& entry : fs::directory_iterator(node_.File("opt"))) {
      EXPECT_THAT(entry.path().filename().string(),
                  Not(HasSubstr(".aks-node-controller-repository")));
      EXPECT_THAT(entry.path().filename().string(), Not(HasSubstr(".aks-node-controller-update")));
    }
  }

  // The fast path staged the binary: the package's bytes with the VHD binary's mode, and no
  // package manager ran.
  void ExpectStagedByFastPath(const RunResult& run, const std::string& format) {
    ASSERT_TRUE(run.status.success()) << run.status.ToString() << "\n" << run.stderr_text;
    EXPECT_EQ(ReadFile(Hotfix()), binary_);
    EXPECT_EQ(ModeOf(Hotfix()), 0750u);
    EXPECT_THAT(Programs(), IsEmpty());
    EXPECT_THAT(Log(), HasSubstr("\"msg\":\"downloaded ANC hotfix through authenticated "
                                 "repository fast path\""));
    EXPECT_THAT(Log(), HasSubstr("\"format\":\"" + format + "\""));
    EXPECT_THAT(EventMessage(), HasSubstr("outcome=installed version=202604.01.1 route=fastPath"));
    ExpectNoLeftovers();
  }

  // An integrity failure: exit 1, the hotfix an earlier run staged deleted, no package manager.
  void ExpectIntegrityFailure(const RunResult& run, const std::string& why) {
    EXPECT_TRUE(run.status.exited) << run.status.ToString();
    EXPECT_EQ(run.status.exit_code, 1) << run.stderr_text;
    EXPECT_FALSE(fs::exists(Hotfix())) << "the stale hotfix binary was not deleted";
    EXPECT_THAT(Programs(), IsEmpty());
    EXPECT_THAT(Log(), HasSubstr("repository integrity check failed for hotfix version " +
                                 std::string(kHotfix)));
    EXPECT_THAT(Log(), HasSubstr(why));
    EXPECT_THAT(EventMessage(), HasSubstr("outcome=failed version=202604.01.1 route=fastPath"));
    ExpectNoLeftovers();
  }

  // Not the fast path's to decide: it says why and the package manager installs.
  void ExpectFallback(const RunResult& run, const std::string& why, const std::string& pm) {
    ASSERT_TRUE(run.status.success()) << run.status.ToString() << "\n" << run.stderr_text;
    EXPECT_THAT(Log(), HasSubstr("falling back to package manager"));
    EXPECT_THAT(Log(), HasSubstr(why));
    EXPECT_THAT(Programs(), Contains(pm));
    EXPECT_EQ(ReadFile(Hotfix()), "installed by the package manager");
    EXPECT_THAT(EventMessage(), HasSubstr("route=packageManager"));
    ExpectNoLeftovers();
  }

  void StaleHotfix() { node_.Write("opt/aks-node-controller-hotfix", "an earlier hotfix", 0755); }

  TempDir node_{"fast-path-node"};
  fs::path vhd_;
  std::string binary_;
  fs::path binary_file_;
  SigningKey key_;
  std::string rpm_db_;
  std::unique_ptr<StaticHttpServer> server_;
};

// ---- Ubuntu ----

TEST_F(RepositoryFastPathTest, DebFromPackagesGzWithoutApt) {
  const fs::path deb = BuildDeb(Deb());
  StaticHttpServer& server = Serve();
  UbuntuNode(server.Url(), {key_.keyring_gpg});
  StaleHotfix();  // replaced atomically
  RunResult run = Agent();
  ExpectStagedByFastPath(run, "deb");
  const std::string pool = "/pool/main/a/aks-node-controller/" + deb.filename().string();
  EXPECT_THAT(server.RequestedPaths(),
              ::testing::UnorderedElementsAre(
                  "/dists/jammy/InRelease",
                  std::string("/dists/jammy/main/binary-") + kDebArch + "/Packages.gz", pool));
  EXPECT_EQ(server.Requests()[0].user_agent, "hotfix-agent/202604.01.0");
}

TEST_F(RepositoryFastPathTest, DebFromPlainPackagesWhenInReleaseListsNoGz) {
  DebRepoOptions deb = Deb();
  deb.gzip_index = false;
  BuildDeb(deb);
  StaticHttpServer& server = Serve();
  UbuntuNode(server.Url(), {key_.keyring_gpg});
  ExpectStagedByFastPath(Agent(), "deb");
  EXPECT_THAT(server.RequestedPaths(),
              Contains(std::string("/dists/jammy/main/binary-") + kDebArch + "/Packages"));
}

TEST_F(RepositoryFastPathTest, DebWithAnArmoredKeyringInADeb822Source) {
  BuildDeb(Deb());
  UbuntuNode(Serve().Url(), {key_.keyring_asc}, "microsoft-prod.sources");
  ExpectStagedByFastPath(Agent(), "deb");
}

TEST_F(RepositoryFastPathTest, DebWithoutSignedByUsesTheMicrosoftKeyringInTrustedGpgD) {
  BuildDeb(Deb());
  UbuntuNode(Serve().Url(), {});
  fs::copy_file(key_.keyring_gpg, node_.File("etc/apt/trusted.gpg.d/microsoft-prod.gpg"));
  ExpectStagedByFastPath(Agent(), "deb");
}

TEST_F(RepositoryFastPathTest, ATamperedPackageIsTerminal) {
  const fs::path deb = BuildDeb(Deb());
  // Same name and size, one byte different: only the SHA-256 can tell.
  std::string bytes = ReadFile(deb);
  bytes[bytes.size() / 2] ^= 0x01;
  std::ofstream(deb, std::ios::binary | std::ios::trunc) << bytes;
  UbuntuNode(Serve().Url(), {key_.keyring_gpg});
  StaleHotfix();
  ExpectIntegrityFailure(Agent(), "package SHA-256 mismatch");
}

TEST_F(RepositoryFastPathTest, AnIndexOfTheWrongSizeIsTerminal) {
  BuildDeb(Deb());
  const fs::path index = DebIndexDir(node_.File("repo"), Deb()) / "Packages.gz";
  std::ofstream(index, std::ios::binary | std::ios::app) << "x";  // after signing
  UbuntuNode(Serve().Url(), {key_.keyring_gpg});
  StaleHotfix();
  ExpectIntegrityFailure(Agent(), "Packages metadata mismatch");
}

TEST_F(RepositoryFastPathTest, AForeignSignerIsTerminal) {
  BuildDeb(Deb());
  SigningKey other = MakeSigningKey(node_.File("other-key"));
  UbuntuNode(Serve().Url(), {other.keyring_gpg});
  StaleHotfix();
  ExpectIntegrityFailure(Agent(), "gpgv verification failed");
}

TEST_F(RepositoryFastPathTest, ASignedStanzaWithTheWrongFilenameIsTerminal) {
  const fs::path deb = BuildDeb(Deb());
  const fs::path packages = DebIndexDir(node_.File("repo"), Deb()) / "Packages";
  std::string text = ReadFile(packages);
  const std::string name = deb.filename().string();
  ASSERT_NE(text.find(name), std::string::npos);
  text.replace(text.find(name), name.size(), "aks-node-controller_other.deb");
  std::ofstream(packages, std::ios::binary | std::ios::trunc) << text;
  ResignDebRepo(node_.File("repo"), key_, "jammy", /*regzip=*/true);
  UbuntuNode(Serve().Url(), {key_.keyring_gpg});
  StaleHotfix();
  ExpectIntegrityFailure(Agent(), "Filename");
}

TEST_F(RepositoryFastPathTest, ABinaryThatIsASymlinkIsTerminal) {
  DebRepoOptions deb = Deb();
  deb.member = BinaryMember::kSymlink;
  BuildDeb(deb);
  UbuntuNode(Serve().Url(), {key_.keyring_gpg});
  StaleHotfix();
  ExpectIntegrityFailure(Agent(), "is not a regular file");
}

TEST_F(RepositoryFastPathTest, AVersionTheIndexDoesNotListFallsBackToApt) {
  BuildDeb(Deb());
  UbuntuNode(Serve().Url(), {key_.keyring_gpg});
  Pointer("202604.01.2");
  Tool("dpkg-query", "printf 'installed\\t202604.01.2\\n'\n");
  ExpectFallback(Agent(), "202604.01.2-ubuntu22.04u1", "apt-get");
}

TEST_F(RepositoryFastPathTest, APackageWithoutTheBinaryFallsBackToApt) {
  DebRepoOptions deb = Deb();
  deb.member = BinaryMember::kAbsent;
  BuildDeb(deb);
  UbuntuNode(Serve().Url(), {key_.keyring_gpg});
  ExpectFallback(Agent(), "deb package does not contain usr/bin/aks-node-controller", "apt-get");
}

TEST_F(RepositoryFastPathTest, ASignedByThatIsNotAPathFallsBackToApt) {
  BuildDeb(Deb());
  UbuntuNode(Serve().Url(), {key_.fingerprint});
  ExpectFallback(Agent(), "APT Signed-By contains unsupported non-path constraint", "apt-get");
}

TEST_F(RepositoryFastPathTest, AMissingIndexFallsBackToApt) {
  BuildDeb(Deb());
  fs::remove(DebIndexDir(node_.File("repo"), Deb()) / "Packages.gz");
  UbuntuNode(Serve().Url(), {key_.keyring_gpg});
  ExpectFallback(Agent(), "HTTP 404 from", "apt-get");
}

// Through a real forward proxy (tinyproxy), as cse_main.sh's HTTPS_PROXY asks. Go never proxies
// loopback, so the repository is reached on this machine's own non-loopback address, over
// HTTPS with a certificate for that IP from a CA the agent trusts through SSL_CERT_FILE (its
// system trust store, as Go's).
class RepositoryThroughProxyTest : public RepositoryFastPathTest {
 protected:
  void SetUp() override {
    ip_ = NonLoopbackIpv4();
    ASSERT_FALSE(ip_.empty()) << "this test needs an IPv4 address other than loopback";
    BuildDeb(Deb());
    TestCa ca = TestCa::Create("repository-ca");
    LeafOptions leaf;
    leaf.ip_addresses = {ip_};
    PemPaths tls = WritePemFiles(node_.path(), "repo-tls", ca.IssueLeaf(leaf));
    ca_file_ = WritePemFile(node_.path(), "repo-ca.pem", ca.cert_pem());
    StaticHttpServerOptions options;
    options.root = node_.File("repo");
    options.host = "0.0.0.0";
    options.tls_cert = tls.cert;
    options.tls_key = tls.key;
    server_ = std::make_unique<StaticHttpServer>(options);
    url_ = "https://" + ip_ + ":" + std::to_string(server_->port()) + "/";
    UbuntuNode(url_, {key_.keyring_gpg});
  }
  std::unique_ptr<Subprocess> StartTinyproxy(uint16_t port) {
    node_.Write("tinyproxy.conf", "Port " + std::to_string(port) +
                                      "\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\n"
                                      "LogLevel Connect\nMaxClients 10\n");
    SpawnOptions spawn;
    spawn.argv = {"tinyproxy", "-d", "-c", node_.File("tinyproxy.conf").string()};
    auto proc = std::make_unique<Subprocess>(std::move(spawn));
    EXPECT_TRUE(WaitUntilListening(port, 10s));
    return proc;
  }

  std::string ip_;
  fs::path ca_file_;
  std::string url_;
};

TEST_F(RepositoryThroughProxyTest, TheDownloadsGoThroughHttpsProxy) {
  const uint16_t port = PickFreePort();
  auto tinyproxy = StartTinyproxy(port);
  RunResult run = Agent({{"HTTPS_PROXY", "http://127.0.0.1:" + std::to_string(port)},
                         {"SSL_CERT_FILE", ca_file_.string()}});
  ExpectStagedByFastPath(run, "deb");
  tinyproxy->Stop();
  const std::string log = tinyproxy->Stdout() + tinyproxy->Stderr();
  // One tunnel per file: InRelease, the index and the package.
  EXPECT_EQ(CountOccurrences(log, "CONNECT " + ip_ + ":" + std::to_string(server_->port())), 3)
      << log;
}

TEST_F(RepositoryThroughProxyTest, ADeadProxyFailsTheDownloadsAndAptTakesOver) {
  RunResult run = Agent({{"HTTPS_PROXY", "http://127.0.0.1:" + std::to_string(PickFreePort())},
                         {"SSL_CERT_FILE", ca_file_.string()}});
  ExpectFallback(run, "connecting to proxy 127.0.0.1", "apt-get");
  EXPECT_THAT(server_->RequestedPaths(), IsEmpty());
}

TEST_F(RepositoryThroughProxyTest, NoProxyNamesTheRepositoryAndTheProxyIsNotUsed) {
  const uint16_t dead = PickFreePort();
  RunResult run = Agent({{"HTTPS_PROXY", "http://127.0.0.1:" + std::to_string(dead)},
                         {"NO_PROXY", ip_},
                         {"SSL_CERT_FILE", ca_file_.string()}});
  ExpectStagedByFastPath(run, "deb");
}

TEST_F(RepositoryThroughProxyTest, ARepositoryCertificateTheSystemDoesNotTrustFallsBack) {
  RunResult run = Agent();  // no SSL_CERT_FILE: the test CA is not in the system's store
  ExpectFallback(run, "server certificate verification failed", "apt-get");
}

// ---- Azure Linux 3 ----

TEST_F(RepositoryFastPathTest, RpmWithReleaseverAndBasearchSubstituted) {
  BuildRpm(Rpm());
  StaticHttpServer& server = Serve();
  AzureLinuxNode(server.Url(), {"file://" + key_.keyring_asc.string()});
  StaleHotfix();
  ExpectStagedByFastPath(Agent(), "rpm");
  const std::string base = std::string("/azurelinux/3.0/prod/ms-oss/") + kRpmArch + "/";
  EXPECT_THAT(server.RequestedPaths(), Contains(base + "repodata/repomd.xml"));
  EXPECT_THAT(server.RequestedPaths(), Contains(base + "repodata/repomd.xml.asc"));
  EXPECT_THAT(
      server.RequestedPaths(),
      Contains(base + "Packages/a/aks-node-controller-202604.01.1-1.azl3." + kRpmArch + ".rpm"));
}

TEST_F(RepositoryFastPathTest, AnUnsignedRpmIsTerminal) {
  RpmRepoOptions rpm = Rpm();
  rpm.sign = false;
  BuildRpm(rpm);
  AzureLinuxNode(Serve().Url(), {"file://" + key_.keyring_asc.string()});
  StaleHotfix();
  ExpectIntegrityFailure(Agent(), "RPM package signature verification failed");
}

TEST_F(RepositoryFastPathTest, ABadRepomdSignatureIsTerminal) {
  BuildRpm(Rpm());
  // repomd.xml changed after it was signed: its detached signature no longer holds.
  const fs::path repomd = RpmRepoDir() / "repodata/repomd.xml";
  std::string xml = ReadFile(repomd);
  xml.insert(xml.rfind("</repomd>"), "<!-- edited -->");
  std::ofstream(repomd, std::ios::binary | std::ios::trunc) << xml;
  AzureLinuxNode(Serve().Url(), {"file://" + key_.keyring_asc.string()});
  StaleHotfix();
  ExpectIntegrityFailure(Agent(), "gpgv verification failed");
}

TEST_F(RepositoryFastPathTest, ARemoteGpgkeyFallsBackToDnf) {
  BuildRpm(Rpm());
  AzureLinuxNode(Serve().Url(), {"https://packages.microsoft.com/keys/microsoft.asc"});
  ExpectFallback(Agent(), "gpgkey", "dnf");
}

}  // namespace
}  // namespace hotfix::testsupport
