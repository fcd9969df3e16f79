// The node client's fault matrix: the real `hotfix-agent check-hotfix` binary, through the real
// stack (HAProxy running deploy/haproxy/haproxy.cfg, routing by ALPN to a libgrpc++ service or
// to a scriptable raw HTTP/2 server, an IMDS stand-in), with exactly one fault injected per
// case. Every case asserts that the node is safe: exit 0, the documented outcome, the pointer
// old or new byte for byte, the run within the time budget, one event, and a log line that
// names the fault.
//
//   hotfix-agent --TLS--> HAProxy --ALPN aks-live-patching--> FakeLpsServer | RawH2Server | TlsPeer
//        |                       `--anything else-----------> TlsPeer "apiserver"
//        `--HTTP--> ImdsStandin
//
// Each fault is one row of Faults() below and its own CTest test
// (FaultMatrix/FaultMatrixTest.KeepsTheNodeSafe/<name>). With LP_FAULT_MATRIX_REPORT=<file>
// every case appends "name<TAB>outcome<TAB>pointer<TAB>log text<TAB>wall ms" to it
// (docs/RELIABILITY.md's table is made from that).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "check_hotfix_run.h"
#include "common/base64.h"
#include "fake_lps_server.h"
#include "haproxy.h"
#include "imds_standin.h"
#include "ports.h"
#include "raw_h2_server.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "text_util.h"
#include "tls_peer.h"

namespace hotfix::testsupport {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using std::chrono::milliseconds;

constexpr char kServedMap[] =
    R"({"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}})";
// Every case starts from this pointer; benign answers and failures must leave it as is.
constexpr char kOldPointer[] = R"({"version":"202604.01.2","scripts_version":"202604.01.1",)"
                               R"("hotfixes":{"202604.01":"202604.01.1"}})";
// The served map staged over it: version and scripts_version carried, hotfixes replaced.
constexpr char kNewPointer[] =
    R"({"version":"202604.01.2","scripts_version":"202604.01.1",)"
    R"("hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}})";
// The node config's cold-start map, and the pointer a customDataFallback stages from it.
constexpr char kColdStartField[] = R"("hotfixes":{"202604.01":"202604.01.7"})";
constexpr char kFallbackPointer[] = R"({"version":"202604.01.2","scripts_version":"202604.01.1",)"
                                    R"("hotfixes":{"202604.01":"202604.01.7"}})";
constexpr char kPointerName[] = "aks-node-controller-hotfix.json";

// docs/CHECK-HOTFIX.md: 5 s worst case (3 s for the exchange, 2 s more for IMDS's retry). The
// margin covers ASan start-up and a loaded CI machine; it is a bound, not a measurement.
constexpr milliseconds kBudget{5000 + 3000};
constexpr auto kRunTimeout = std::chrono::seconds(30);

// What one run of the binary left behind.
struct AgentRun {
  ExitStatus status;
  std::string stderr_text;
  std::string log_file;  // the --log-file's JSON lines, raw
  std::vector<Json> log_lines;
  std::vector<Json> events;
};

// The whole stack for one case. A fault's setup changes the defaults (files, IMDS, which
// server sits behind the ALPN route, where the client connects) before Start() launches HAProxy.
class Rig {
 public:
  Rig() {
    fs::create_directories(PointerDir());
    Write(PointerPath(), kOldPointer);
    WriteNodeConfig();
  }
  ~Rig() {
    if (lock_fd >= 0) close(lock_fd);
    // Mounts first: the temp folder cannot be removed while something is mounted in it.
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  // ---- Paths ----
  fs::path PointerDir() const { return dir.File("containers"); }
  fs::path PointerPath() const { return PointerDir() / kPointerName; }
  fs::path EventsDir() const { return dir.File("events"); }
  fs::path NodeConfigPath() const { return dir.File("aks-node-controller-config.json"); }
  fs::path NbcCmdPath() const { return dir.File("aks-node-controller-nbc-cmd.sh"); }
  fs::path LogPath() const { return dir.File("aks-node-controller.log"); }

  static void Write(const fs::path& path, std::string_view text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) throw std::runtime_error("writing " + path.string());
  }

  // ---- Inputs ----
  // The AKSNodeConfig JSON; `extra` is spliced in as further top-level members.
  void WriteNodeConfig(const std::string& extra = "",
                       const std::string& api_server = kApiserverFqdn,
                       const std::optional<std::string>& ca_field = std::nullopt) {
    Json config = NodeConfigJson(api_server, ca.cert_pem());
    if (ca_field) config["kubernetes_ca_cert"] = *ca_field;
    std::string text = config.dump();
    if (!extra.empty()) text = text.substr(0, text.size() - 1) + "," + extra + "}";
    Write(NodeConfigPath(), text);
  }
  // The node config with a cold-start map: fallback-eligible failures become
  // customDataFallback with kFallbackPointer.
  void WithColdStartMap() { WriteNodeConfig(kColdStartField); }
  void WriteNbcCmd(const std::string& ca_assignment) {
    Write(NbcCmdPath(), std::string("PROVISION_OUTPUT=\"/var/log/azure/cluster-provision.log\"; ") +
                            "API_SERVER_NAME=" + kApiserverFqdn + " " + ca_assignment +
                            " /usr/bin/nohup /bin/bash -c \"/bin/bash /opt/azure/containers/"
                            "provision_start.sh\"");
  }

  // ---- What sits behind the ALPN route (the default: the libgrpc++ FakeLpsServer) ----
  CertAndKey ServiceCert() const { return IssueLocalServerCert(ca, {kApiserverFqdn}); }
  FakeLpsServer& Lps(std::optional<CertAndKey> cert = std::nullopt) {
    if (!lps) {
      FakeLpsServerOptions options;
      options.cert = cert ? *cert : ServiceCert();
      lps = std::make_unique<FakeLpsServer>(std::move(options));
      lps->SetConfig(kServedMap);
      service_port_ = lps->port();
    }
    return *lps;
  }
  RawH2Server& Raw(RawH2Reply reply) {
    RawH2ServerOptions options;
    options.cert = ServiceCert();
    options.reply = std::move(reply);
    raw = std::make_unique<RawH2Server>(std::move(options));
    service_port_ = raw->port();
    return *raw;
  }
  TlsPeer& Peer(TlsPeerMode mode) {
    TlsPeerOptions options;
    options.mode = mode;
    options.cert = ServiceCert();
    peer = std::make_unique<TlsPeer>(std::move(options));
    service_port_ = peer->port();
    return *peer;
  }
  // Nothing listens where HAProxy sends the live-patching route.
  void ServiceDown() { service_port_ = PickFreePort(); }

  // ---- Disk ----
  // A read-only bind mount of `path` over itself (root ignores permission bits, a read-only
  // mount it does not). False, with skip_reason set, where mounting is not allowed.
  bool MountReadOnly(const fs::path& path) {
    if (mount(path.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return CannotMount("bind mount", path);
    }
    mounts_.push_back(path);
    if (mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      return CannotMount("read-only remount", path);
    }
    return true;
  }
  bool MountTmpfs(const fs::path& path, const std::string& options) {
    if (mount("tmpfs", path.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      return CannotMount("tmpfs mount", path);
    }
    mounts_.push_back(path);
    return true;
  }

  // ---- Running ----
  void Start() {
    if (service_port_ == 0) Lps();
    apiserver = std::make_unique<TlsPeer>(SilentApiserverOptions(ca, kApiserverFqdn));
    proxy = std::make_unique<Haproxy>(AlpnRouteOptions(service_port_, apiserver->port()));
  }

  AgentRun Run() {
    CheckHotfixArgs args;
    args.node_config = NodeConfigPath();
    args.nbc_cmd = NbcCmdPath();
    args.pointer = PointerPath();
    args.imds_url = imds_url;
    args.events_dir = EventsDir();
    args.log_file = LogPath();
    if (connect_to) args.connect_to = connect_to->empty() ? proxy->frontend_address() : *connect_to;
    args.extra_args = extra_args;
    args.env = env;
    RunResult r = RunProcess(CheckHotfixSpawn(args), kRunTimeout);
    AgentRun run;
    run.status = r.status;
    run.stderr_text = r.stderr_text;
    run.log_file = ReadFile(LogPath());
    run.log_lines = JsonLines(run.log_file);
    run.events = ReadEventFiles(EventsDir());
    return run;
  }

  TestCa ca = TestCa::Create("fault-matrix-cluster-ca");
  TempDir dir{"fault-matrix"};
  ImdsStandin imds;
  std::string imds_url = imds.document_url();
  std::map<std::string, std::string> env;
  // "": through HAProxy's frontend (the default); a HOST:PORT: straight there; nullopt: no
  // --connect-to at all (the apiserver name is resolved and port 443 dialled).
  std::optional<std::string> connect_to = "";
  std::unique_ptr<FakeLpsServer> lps;
  std::unique_ptr<RawH2Server> raw;
  std::unique_ptr<TlsPeer> peer;
  std::unique_ptr<TlsPeer> apiserver;
  std::unique_ptr<Haproxy> proxy;
  // Other servers a case needs alive for the run (a second IMDS, a forward proxy, ...).
  std::unique_ptr<ImdsStandin> other_imds;
  std::unique_ptr<TlsPeer> bystander;
  std::unique_ptr<Subprocess> helper;
  std::vector<std::string> extra_args;
  int lock_fd = -1;  // a flock another writer holds for the whole run
  std::string skip_reason;

 private:
  bool CannotMount(const char* what, const fs::path& path) {
    skip_reason = std::string(what) + " of " + path.string() + " failed: " + std::strerror(errno) +
                  " (needs root with CAP_SYS_ADMIN)";
    return false;
  }

  uint16_t service_port_ = 0;
  std::vector<fs::path> mounts_;
};

enum class PointerAfter {
  kOld,         // kOldPointer, byte for byte
  kNew,         // kNewPointer, byte for byte
  kServedOnly,  // kServedMap as a pointer: there was no old file to carry fields from
  kFallback,    // kFallbackPointer, byte for byte
  kAbsent,      // no pointer file (its folder is missing)
  kDirectory,   // the folder that stood in its place, untouched
};

const char* PointerName(PointerAfter p) {
  switch (p) {
    case PointerAfter::kOld:
      return "kept";
    case PointerAfter::kNew:
      return "replaced (served map)";
    case PointerAfter::kServedOnly:
      return "created (served map)";
    case PointerAfter::kFallback:
      return "replaced (cold-start map)";
    case PointerAfter::kAbsent:
      return "absent (no folder)";
    case PointerAfter::kDirectory:
      return "kept (a folder)";
  }
  return "?";
}

struct Fault {
  std::string name;
  std::function<void(Rig&)> setup;
  std::string outcome;
  std::string log_text;  // a substring of the log file (or stderr) that names the fault
  PointerAfter pointer;
  int events = 1;
  // Further checks on what the peers saw (optional).
  std::function<void(Rig&, const AgentRun&)> verify = nullptr;
  // Where the log lines are read: the --log-file, or stderr when the file is the fault.
  bool log_on_stderr = false;
};

std::ostream& operator<<(std::ostream& out, const Fault& f) { return out << f.name; }

// ---- Setups used by several rows ----

void ServeConfig(Rig& r, std::string config) { r.Lps().SetConfig(std::move(config)); }

RawH2Reply Trailers(int code, std::string message = "") {
  RawH2Reply reply;
  reply.headers = GrpcTrailers(code, message);
  reply.headers_only = true;
  return reply;
}

RawH2Reply Served(std::string config) {
  RawH2Reply reply;
  reply.body = GrpcFrame(ComponentConfigResponse(config));
  reply.trailers = GrpcTrailers(0);
  return reply;
}

// A code in trailers-only form; the cold-start map is present, so the outcome shows whether
// the code falls back (customDataFallback), is benign (noHotfixAvailable) or authoritative.
Fault CodeRow(int code, const char* name, const char* outcome, PointerAfter pointer,
              const char* log_text) {
  return {std::string("GrpcCode") + std::to_string(code) + name,
          [code](Rig& r) {
            r.WithColdStartMap();
            r.Raw(Trailers(code, "fault-" + std::to_string(code)));
          },
          outcome, log_text, pointer};
}

void NoProxyContacted(Rig& r, const AgentRun&) {
  ASSERT_NE(r.bystander, nullptr);
  EXPECT_EQ(r.bystander->accepted_count(), 0u) << "the proxy variable was used";
  for (const ImdsRequest& req : r.imds.requests()) EXPECT_FALSE(req.LooksProxied());
}

std::vector<Fault> Faults() {
  using P = PointerAfter;
  std::vector<Fault> f = {
      // ---- IMDS ----
      {"ImdsDown",
       [](Rig& r) {
         r.imds_url = "http://127.0.0.1:" + std::to_string(PickFreePort()) +
                      "/metadata/attested/document?api-version=2025-04-07";
       },
       "failed", "Connection refused", P::kOld},
      {"ImdsSlowPastTheAttemptTimeout", [](Rig& r) { r.imds.SetDelay(milliseconds(2500)); },
       "failed", "no response headers within 1000 ms", P::kOld},
      {"ImdsSlowOnceThenAnswers", [](Rig& r) { r.imds.SetDelay(milliseconds(2500), 1); }, "lpsRead",
       "no response headers within 1000 ms", P::kNew},
      {"ImdsNeverAnswers",
       [](Rig& r) {
         TlsPeerOptions silent;
         silent.mode = TlsPeerMode::kAcceptOnly;
         r.bystander = std::make_unique<TlsPeer>(std::move(silent));
         r.imds_url = "http://127.0.0.1:" + std::to_string(r.bystander->port()) +
                      "/metadata/attested/document?api-version=2025-04-07";
       },
       "failed", "no response headers within 1000 ms", P::kOld},
      {"ImdsResetsTheConnection",
       [](Rig& r) {
         RawH2ServerOptions options;
         options.cert = r.ServiceCert();
         options.reply.action = RawH2Action::kTcpResetInHandshake;  // resets after the request
         r.raw = std::make_unique<RawH2Server>(std::move(options));
         r.imds_url = "http://127.0.0.1:" + std::to_string(r.raw->port()) +
                      "/metadata/attested/document?api-version=2025-04-07";
       },
       "failed", "Connection reset by peer", P::kOld},
      {"Imds500Then200", [](Rig& r) { r.imds.FailFirst(1, 500); }, "lpsRead",
       "imds returned status 500", P::kNew},
      {"Imds503Twice", [](Rig& r) { r.imds.FailFirst(2, 503); }, "failed",
       "imds returned status 503", P::kOld},
      {"Imds200NotJson", [](Rig& r) { r.imds.SetBody("<html>maintenance</html>"); }, "failed",
       "decoding imds response: invalid JSON", P::kOld},
      {"ImdsEmptySignature",
       [](Rig& r) { r.imds.SetBody(R"({"encoding":"pkcs7","signature":""})"); }, "failed",
       "imds attested document had empty signature", P::kOld},
      {"ImdsMissingSignature", [](Rig& r) { r.imds.SetBody(R"({"encoding":"pkcs7"})"); }, "failed",
       "imds attested document had empty signature", P::kOld},
      {"ImdsSignatureNotAString",
       [](Rig& r) { r.imds.SetBody(R"({"encoding":"pkcs7","signature":42})"); }, "failed",
       "signature is not a string", P::kOld},
      {"ImdsBodyOver1MiB", [](Rig& r) { r.imds.SetBodySize((size_t{1} << 20) + 1); }, "failed",
       "imds response body exceeds 1048576 bytes", P::kOld},
      {"ImdsRedirect",
       [](Rig& r) {
         r.other_imds = std::make_unique<ImdsStandin>();
         r.imds.SetRedirect(r.other_imds->document_url(), 302);
       },
       "failed", "imds returned status 302", P::kOld, 1,
       [](Rig& r, const AgentRun&) {
         EXPECT_EQ(r.other_imds->request_count(), 0u) << "the redirect was followed";
       }},
      // Neither IMDS nor the service dial ever uses a proxy (the reference dials the service
      // with grpc.WithNoProxy): a proxy that accepts and never answers would hold the run.
      {"ProxyVariablesIgnored",
       [](Rig& r) {
         TlsPeerOptions silent;
         silent.mode = TlsPeerMode::kAcceptOnly;
         r.bystander = std::make_unique<TlsPeer>(std::move(silent));
         std::string proxy = "http://127.0.0.1:" + std::to_string(r.bystander->port());
         r.env = {{"HTTP_PROXY", proxy},  {"http_proxy", proxy}, {"HTTPS_PROXY", proxy},
                  {"https_proxy", proxy}, {"ALL_PROXY", proxy},  {"all_proxy", proxy}};
       },
       "lpsRead", "staged hotfix pointer for download-hotfix", P::kNew, 1, NoProxyContacted},

      // ---- Endpoint: the node config and nbc-cmd ----
      {"NodeConfigMissingNbcCmdQuoted",
       [](Rig& r) {
         fs::remove(r.NodeConfigPath());
         r.WriteNbcCmd("KUBE_CA_CRT=\"" + EncodeStdBase64(r.ca.cert_pem()) + "\"");
       },
       "lpsRead", "loaded LPS target from nbc-cmd.sh fallback", P::kNew},
      {"NodeConfigMissingNbcCmdUnquoted",
       [](Rig& r) {
         fs::remove(r.NodeConfigPath());
         r.WriteNbcCmd("KUBE_CA_CRT=" + EncodeStdBase64(r.ca.cert_pem()));
       },
       "lpsRead", "loaded LPS target from nbc-cmd.sh fallback", P::kNew},
      {"NodeConfigAndNbcCmdMissing", [](Rig& r) { fs::remove(r.NodeConfigPath()); }, "failed",
       "reading nbc-cmd", P::kOld},
      {"NodeConfigUnreadable",
       [](Rig& r) {
         // Root reads any file: a folder in its place is what stays unreadable.
         fs::remove(r.NodeConfigPath());
         fs::create_directory(r.NodeConfigPath());
         r.WriteNbcCmd("KUBE_CA_CRT=\"" + EncodeStdBase64(r.ca.cert_pem()) + "\"");
       },
       "failed", "Is a directory", P::kOld},
      {"NodeConfigSymlinkLoop",
       [](Rig& r) {
         fs::remove(r.NodeConfigPath());
         fs::create_symlink(r.NodeConfigPath(), r.NodeConfigPath());
       },
       "failed", "Too many levels of symbolic links", P::kOld},
      {"NodeConfigIsAFifo",
       [](Rig& r) {
         // Nothing ever writes to it: opening it for reading must not wait for a writer.
         fs::remove(r.NodeConfigPath());
         ASSERT_EQ(mkfifo(r.NodeConfigPath().c_str(), 0644), 0);
       },
       "failed", "not a regular file", P::kOld},
      {"NodeConfigInvalidJson", [](Rig& r) { Rig::Write(r.NodeConfigPath(), "{\"version\": v1"); },
       "failed", "proto: syntax error", P::kOld},
      {"NodeConfigNoApiserverName",
       [](Rig& r) {
         Rig::Write(
             r.NodeConfigPath(),
             Json{{"version", "v1"}, {"kubernetes_ca_cert", EncodeStdBase64(r.ca.cert_pem())}}
                 .dump());
       },
       "failed", "node config has no api_server_config.api_server_name", P::kOld},
      {"NodeConfigCaNotBase64",
       [](Rig& r) { r.WriteNodeConfig("", kApiserverFqdn, std::string("not base64 at all!")); },
       "failed", "decoding node config kubernetes_ca_cert", P::kOld},
      {"NodeConfigCaNotPem",
       [](Rig& r) { r.WriteNodeConfig("", kApiserverFqdn, EncodeStdBase64("this is not PEM")); },
       "failed", "failed to parse cluster CA PEM", P::kOld},
      {"NodeConfigNoCa", [](Rig& r) { r.WriteNodeConfig("", kApiserverFqdn, std::string()); },
       "failed", "cluster CA unavailable", P::kOld},

      // ---- Network ----
      {"UnresolvableApiserverName",
       [](Rig& r) {
         r.WriteNodeConfig("", "lps-fault-matrix.invalid");
         r.connect_to = std::nullopt;
       },
       "failed", "resolving lps-fault-matrix.invalid", P::kOld},
      {"ConnectionRefused", [](Rig& r) { r.connect_to = LoopbackAddress(PickFreePort()); },
       "failed", "Connection refused", P::kOld},
      // HAProxy accepts, then retries the refused backend (1 s apart) while holding the
      // ClientHello: the client's own 3 s dial deadline ends it.
      {"ServiceDownBehindHaproxy", [](Rig& r) { r.ServiceDown(); }, "failed", "timed out", P::kOld},
      {"PeerAcceptsAndNeverAnswers", [](Rig& r) { r.Peer(TlsPeerMode::kAcceptOnly); }, "failed",
       "timed out", P::kOld},
      {"ResetDuringTheHandshake",
       [](Rig& r) {
         RawH2Reply reply;
         reply.action = RawH2Action::kTcpResetInHandshake;
         r.Raw(reply);
         // Straight to the server: HAProxy turns the backend's RST into an orderly close.
         r.connect_to = LoopbackAddress(r.raw->port());
       },
       "failed", "Connection reset by peer", P::kOld},
      {"ResetAfterTheRequest",
       [](Rig& r) {
         RawH2Reply reply;
         reply.action = RawH2Action::kTcpResetAfterRequest;
         r.Raw(reply);
         r.connect_to = LoopbackAddress(r.raw->port());
       },
       "failed", "Connection reset by peer", P::kOld},

      {"PeerCompletesTlsThenStaysSilent",
       [](Rig& r) {
         r.Peer(TlsPeerMode::kSelectH2Silent);  // no SETTINGS, no response, ever
         r.extra_args = {"--lps-timeout", "1s"};
       },
       "failed", "code DeadlineExceeded: context deadline exceeded", P::kOld},
      {"ServiceAnswersTooLate",
       [](Rig& r) {
         r.Lps().SetDelay(milliseconds(8000));
         r.extra_args = {"--lps-timeout", "1s"};
       },
       "failed", "code DeadlineExceeded", P::kOld, 1,
       [](Rig& r, const AgentRun&) {
         ASSERT_EQ(r.lps->call_count(), 1u);
         // grpc-timeout told the service what was left: at most 1 s + the 2 s IMDS allowance.
         ASSERT_TRUE(r.lps->calls()[0].deadline_remaining.has_value());
         EXPECT_LE(r.lps->calls()[0].deadline_remaining->count(), 3000);
       }},

      // ---- TLS ----
      {"UntrustedCa",
       [](Rig& r) {
         TestCa other = TestCa::Create("some-other-ca");
         r.WriteNodeConfig("", kApiserverFqdn, EncodeStdBase64(other.cert_pem()));
       },
       "failed", "unable to get local issuer certificate", P::kOld},
      {"ExpiredCertificate",
       [](Rig& r) {
         LeafOptions leaf;
         leaf.common_name = kApiserverFqdn;
         leaf.dns_names = {kApiserverFqdn};
         leaf.not_before = -std::chrono::hours(48);
         leaf.not_after = -std::chrono::hours(1);
         r.Lps(r.ca.IssueLeaf(leaf));
       },
       "failed", "certificate has expired", P::kOld},
      {"CertificateNotYetValid",
       [](Rig& r) {
         LeafOptions leaf;
         leaf.common_name = kApiserverFqdn;
         leaf.dns_names = {kApiserverFqdn};
         leaf.not_before = std::chrono::hours(1);
         leaf.not_after = std::chrono::hours(48);
         r.Lps(r.ca.IssueLeaf(leaf));
       },
       "failed", "certificate is not yet valid", P::kOld},
      {"WrongServerName",
       [](Rig& r) { r.Lps(IssueLocalServerCert(r.ca, {"not-the-lps.example.com"})); }, "failed",
       "hostname mismatch", P::kOld},
      {"ClientAuthOnlyCertificate",
       [](Rig& r) {
         LeafOptions leaf;
         leaf.common_name = kApiserverFqdn;
         leaf.dns_names = {kApiserverFqdn};
         leaf.usage = KeyUsage::kClientAuth;
         r.Lps(r.ca.IssueLeaf(leaf));
       },
       "failed", "unsuitable certificate purpose", P::kOld},
      {"ServerSelectsNoAlpn", [](Rig& r) { r.Peer(TlsPeerMode::kNoAlpn); }, "failed",
       "server selected ALPN none, need h2", P::kOld},
      {"ServerSelectsHttp11", [](Rig& r) { r.Peer(TlsPeerMode::kSelectHttp11); }, "failed",
       "SSL routines::bad extension", P::kOld},
      {"ServerSpeaksOnlyTls11", [](Rig& r) { r.Peer(TlsPeerMode::kTls11Only); }, "failed",
       "tlsv1 alert protocol version", P::kOld},

      // ---- HTTP/2 and gRPC (RawH2Server behind HAProxy) ----
      {"GrpcCode0WithTheServedMap", [](Rig& r) { r.Raw(Served(kServedMap)); }, "lpsRead",
       "staged hotfix pointer for download-hotfix", P::kNew},
      {"Goaway",
       [](Rig& r) {
         RawH2Reply reply;
         reply.action = RawH2Action::kGoaway;
         reply.error_code = 0;  // NO_ERROR: a graceful shutdown that refuses our stream
         reply.goaway_debug = "draining";
         r.Raw(reply);
       },
       "failed", "server sent GOAWAY (NO_ERROR) before responding: draining", P::kOld},
      {"RstStreamInternalError",
       [](Rig& r) {
         RawH2Reply reply;
         reply.action = RawH2Action::kRstStream;
         reply.error_code = 2;  // INTERNAL_ERROR
         r.Raw(reply);
       },
       "failed", "stream terminated by RST_STREAM with error code: INTERNAL_ERROR", P::kOld},
      {"RstStreamRefusedFallsBack",
       [](Rig& r) {
         r.WithColdStartMap();
         RawH2Reply reply;
         reply.action = RawH2Action::kRstStream;
         reply.error_code = 7;  // REFUSED_STREAM: Unavailable, fallback-eligible
         r.Raw(reply);
       },
       "customDataFallback", "REFUSED_STREAM", P::kFallback},
      {"Http404WithoutGrpcStatus",
       [](Rig& r) {
         RawH2Reply reply;
         reply.http_status = 404;
         reply.content_type = "text/plain";
         reply.headers_only = true;
         r.Raw(reply);
       },
       "failed", "code Unimplemented: unexpected HTTP status code received from server: 404",
       P::kOld},
      {"Http503WithoutGrpcStatusFallsBack",
       [](Rig& r) {
         r.WithColdStartMap();
         RawH2Reply reply;
         reply.http_status = 503;
         reply.content_type = "text/html";
         reply.body = "<html>busy</html>";
         reply.trailers = std::nullopt;
         r.Raw(reply);
       },
       "customDataFallback",
       "code Unavailable: unexpected HTTP status code received from server: 503", P::kFallback},
      {"Http404WithGrpcStatusNotFound",
       [](Rig& r) {
         RawH2Reply reply = Trailers(5, "nothing published");
         reply.http_status = 404;
         r.Raw(reply);
       },
       "noHotfixAvailable", "code NotFound", P::kOld},
      {"Http503WithGrpcStatusUnavailable",
       [](Rig& r) {
         RawH2Reply reply = Trailers(14, "overloaded");
         reply.http_status = 503;
         r.Raw(reply);
       },
       "failed", "code Unavailable: overloaded", P::kOld},
      {"MissingTrailers",
       [](Rig& r) {
         RawH2Reply reply = Served(kServedMap);
         reply.trailers = std::nullopt;
         r.Raw(reply);
       },
       "failed", "server closed the stream without sending trailers", P::kOld},
      {"NoContentType",
       [](Rig& r) {
         RawH2Reply reply = Served(kServedMap);
         reply.content_type = std::nullopt;
         r.Raw(reply);
       },
       "failed", "server response has no content-type", P::kOld},
      {"CompressedFlag",
       [](Rig& r) {
         RawH2Reply reply = Served(kServedMap);
         reply.body = GrpcFrame(ComponentConfigResponse(kServedMap), /*flags=*/1);
         reply.headers = {{"grpc-encoding", "gzip"}};
         r.Raw(reply);
       },
       "failed", "compressed response not supported", P::kOld},
      {"TwoMessages",
       [](Rig& r) {
         RawH2Reply reply = Served(kServedMap);
         reply.body += reply.body;
         r.Raw(reply);
       },
       "failed", "cardinality violation: expected <EOF>", P::kOld},
      {"FiveMiBResponse",
       [](Rig& r) {
         // Over the 4 MiB limit: ResourceExhausted is authoritative, the cold-start map unused.
         r.WithColdStartMap();
         r.Raw(Served(R"({"hotfixes":{},"pad":")" + std::string(5 << 20, 'x') + "\"}"));
       },
       "failed", "received message larger than max", P::kOld},
      {"DeclaredLengthLongerThanTheData",
       [](Rig& r) {
         std::string message = ComponentConfigResponse(kServedMap);
         RawH2Reply reply = Served(kServedMap);
         reply.body = GrpcFrame(message, 0, static_cast<uint32_t>(message.size() + 100));
         r.Raw(reply);
       },
       "failed", "server sent a truncated message", P::kOld},
      {"DeclaredLengthShorterThanTheData",
       [](Rig& r) {
         std::string message = ComponentConfigResponse(kServedMap);
         RawH2Reply reply = Served(kServedMap);
         reply.body = GrpcFrame(message, 0, static_cast<uint32_t>(message.size() - 3));
         r.Raw(reply);
       },
       "failed", "3 stray bytes after the message", P::kOld},
      {"OkWithoutAMessage", [](Rig& r) { r.Raw(Trailers(0)); }, "failed",
       "received no response message", P::kOld},
      {"MalformedGrpcStatus",
       [](Rig& r) {
         RawH2Reply reply;
         reply.headers_only = true;
         reply.headers = {{"grpc-status", "fourteen"}};
         r.Raw(reply);
       },
       "failed", "malformed grpc-status", P::kOld},
      CodeRow(1, "Canceled", "customDataFallback", P::kFallback, "code Canceled: fault-1"),
      CodeRow(2, "Unknown", "customDataFallback", P::kFallback, "code Unknown: fault-2"),
      CodeRow(3, "InvalidArgument", "failed", P::kOld,
              "not falling back: LPS gRPC call failed with code InvalidArgument: fault-3"),
      CodeRow(4, "DeadlineExceeded", "customDataFallback", P::kFallback,
              "code DeadlineExceeded: fault-4"),
      CodeRow(5, "NotFound", "noHotfixAvailable", P::kOld, "(code NotFound)"),
      CodeRow(6, "AlreadyExists", "customDataFallback", P::kFallback,
              "code AlreadyExists: fault-6"),
      CodeRow(7, "PermissionDenied", "noHotfixAvailable", P::kOld, "(code PermissionDenied)"),
      CodeRow(8, "ResourceExhausted", "failed", P::kOld,
              "not falling back: LPS gRPC call failed with code ResourceExhausted: fault-8"),
      CodeRow(9, "FailedPrecondition", "customDataFallback", P::kFallback,
              "code FailedPrecondition: fault-9"),
      CodeRow(10, "Aborted", "customDataFallback", P::kFallback, "code Aborted: fault-10"),
      CodeRow(11, "OutOfRange", "customDataFallback", P::kFallback, "code OutOfRange: fault-11"),
      CodeRow(12, "Unimplemented", "customDataFallback", P::kFallback,
              "code Unimplemented: fault-12"),
      CodeRow(13, "Internal", "customDataFallback", P::kFallback, "code Internal: fault-13"),
      CodeRow(14, "Unavailable", "customDataFallback", P::kFallback, "code Unavailable: fault-14"),
      CodeRow(15, "DataLoss", "customDataFallback", P::kFallback, "code DataLoss: fault-15"),
      CodeRow(16, "Unauthenticated", "noHotfixAvailable", P::kOld, "(code Unauthenticated)"),
      {"PercentEncodedGrpcMessage",
       [](Rig& r) { r.Raw(Trailers(3, "component%20%22x%22%3A 100%25 wrong%0Aretry")); }, "failed",
       "code InvalidArgument: component \\\"x\\\": 100% wrong\\nretry", P::kOld},

      // ---- Data: the served config ----
      {"ServedInvalidJson", [](Rig& r) { ServeConfig(r, "{\"hotfixes\": {\"202604.01\""); },
       "failed", "parsing LPS hotfix pointer: unmarshaling hotfix pointer JSON", P::kOld},
      {"ServedWrongTypeForTheMap",
       [](Rig& r) { ServeConfig(r, R"({"hotfixes":["202604.01.3"]})"); }, "failed",
       "cannot unmarshal array into Go struct field hotfixConfig.hotfixes", P::kOld},
      {"ServedWrongTypeForAVersion",
       [](Rig& r) { ServeConfig(r, R"({"hotfixes":{"202604.01":3}})"); }, "failed",
       "cannot unmarshal number into Go struct field hotfixConfig.hotfixes of type string",
       P::kOld},
      {"ServedNonUtf8",
       // A protobuf library refuses to send this string, so the raw server sends it.
       [](Rig& r) { r.Raw(Served("{\"hotfixes\":{\"202604.01\":\"202604.01.\xff\xfe\"}}")); },
       "failed", "failed to unmarshal the received GetComponentConfigResponse", P::kOld},
      {"ServedNesting10000Deep",
       [](Rig& r) { ServeConfig(r, std::string(10000, '[') + std::string(10000, ']')); }, "failed",
       "cannot unmarshal array into Go value of type main.hotfixConfig", P::kOld},
      {"ServedNesting10001Deep",
       [](Rig& r) {
         ServeConfig(r, "{\"hotfixes\":" + std::string(10000, '[') + std::string(10000, ']') + "}");
       },
       "failed", "exceeded max depth", P::kOld},
      {"ServedEmptyObject", [](Rig& r) { ServeConfig(r, "{}"); }, "noHotfixAvailable",
       "LPS returned no hotfixes for this node", P::kOld},
      {"ServedNull", [](Rig& r) { ServeConfig(r, "null"); }, "noHotfixAvailable",
       "LPS returned no hotfixes for this node", P::kOld},
      {"ServedEmptyString", [](Rig& r) { ServeConfig(r, ""); }, "noHotfixAvailable",
       "LPS returned no hotfixes for this node", P::kOld},

      // ---- Disk ----
      {"PointerFolderReadOnly", [](Rig& r) { r.MountReadOnly(r.PointerDir()); }, "failed",
       "Read-only file system", P::kOld},
      {"PointerFolderFull",
       [](Rig& r) {
         if (!r.MountTmpfs(r.PointerDir(), "size=16k,mode=0755")) return;
         Rig::Write(r.PointerPath(), kOldPointer);
         // Fill every remaining block: the temp file can be created but not written.
         std::ofstream filler(r.PointerDir() / "filler", std::ios::binary);
         std::string block(4096, 'x');
         for (int i = 0; i < 16 && filler.write(block.data(), block.size()); ++i) {
         }
       },
       "failed", "No space left on device", P::kOld},
      {"PointerFolderMissing", [](Rig& r) { fs::remove_all(r.PointerDir()); }, "failed",
       "No such file or directory", P::kAbsent},
      {"PointerIsADirectory",
       [](Rig& r) {
         fs::remove(r.PointerPath());
         fs::create_directory(r.PointerPath());
         Rig::Write(r.PointerPath() / "keep", "x");
       },
       "failed", "Is a directory", P::kDirectory},
      {"PointerIsADanglingSymlink",
       [](Rig& r) {
         fs::remove(r.PointerPath());
         fs::create_symlink(r.dir.File("nowhere") / kPointerName, r.PointerPath());
       },
       "lpsRead", "hotfix pointer path is a symlink; replacing the link with a regular file",
       P::kServedOnly, 1,
       [](Rig& r, const AgentRun&) {
         // rename(2) replaced the link itself; nothing was created where it pointed.
         EXPECT_FALSE(fs::is_symlink(r.PointerPath()));
         EXPECT_FALSE(fs::exists(r.dir.File("nowhere")));
       }},
      {"PointerIsAFifo",
       [](Rig& r) {
         fs::remove(r.PointerPath());
         ASSERT_EQ(mkfifo(r.PointerPath().c_str(), 0644), 0);
       },
       "lpsRead", "not a regular file", P::kServedOnly, 1,
       [](Rig& r, const AgentRun&) { EXPECT_TRUE(fs::is_regular_file(r.PointerPath())); }},
      {"PointerFolderLockedByAnotherWriter",
       [](Rig& r) {
         r.lock_fd = open(r.PointerDir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
         ASSERT_GE(r.lock_fd, 0);
         ASSERT_EQ(flock(r.lock_fd, LOCK_EX), 0);
       },
       "failed", "held by another process", P::kOld},
      {"LogFileUnopenable",
       [](Rig& r) { fs::create_directories(r.LogPath()); },  // a folder where the file goes
       "lpsRead", "could not open log file; logging to stderr only", P::kNew, 1, nullptr,
       /*log_on_stderr=*/true},
      {"EventsFolderUnwritable",
       [](Rig& r) {
         fs::create_directories(r.EventsDir());
         r.MountReadOnly(r.EventsDir());
       },
       "lpsRead", "failed to write guest agent event", P::kNew, 0,
       [](Rig&, const AgentRun& run) {
         EXPECT_THAT(run.log_file, HasSubstr("Read-only file system"));
       }},
  };
  return f;
}

class FaultMatrixTest : public ::testing::TestWithParam<Fault> {
 protected:
  void TearDown() override {
    if (HasFailure() && rig_ && rig_->proxy) {
      ADD_FAILURE() << "HAProxy log:\n" << rig_->proxy->Log() << "\nagent stderr:\n" << stderr_;
    } else if (HasFailure()) {
      ADD_FAILURE() << "agent stderr:\n" << stderr_;
    }
  }

  // The outcome the run reported: the event's, or (no event) the completion log line's.
  static std::string OutcomeOf(const AgentRun& run) {
    if (!run.events.empty()) {
      std::string message = run.events[0].value("Message", "");
      constexpr std::string_view kPrefix = "check-hotfix outcome=";
      if (message.rfind(kPrefix, 0) != 0) return "?";
      return message.substr(kPrefix.size(),
                            message.find_first_of(" |", kPrefix.size()) - kPrefix.size());
    }
    std::vector<Json> lines = run.log_lines;
    std::istringstream err(run.stderr_text);
    for (std::string line; std::getline(err, line);) {
      lines.push_back(Json::parse(line, nullptr, /*allow_exceptions=*/false));
    }
    for (const Json& line : lines) {
      if (line.is_object() && line.value("msg", "").rfind("check-hotfix completed", 0) == 0) {
        return line.value("outcome", "?");
      }
    }
    return "?";
  }

  std::unique_ptr<Rig> rig_;
  std::string stderr_;
};

TEST_P(FaultMatrixTest, KeepsTheNodeSafe) {
  const Fault& fault = GetParam();
  rig_ = std::make_unique<Rig>();
  Rig& r = *rig_;
  fault.setup(r);
  if (!r.skip_reason.empty()) GTEST_SKIP() << r.skip_reason;
  r.Start();

  AgentRun run = r.Run();
  stderr_ = run.stderr_text;

  // Fail-open: exit 0 whatever happened, and within the budget.
  EXPECT_TRUE(run.status.success()) << run.status.ToString();
  EXPECT_LT(run.status.wall_time, kBudget);
  // Exactly one event (none only where the events folder itself is the fault).
  ASSERT_EQ(run.events.size(), static_cast<size_t>(fault.events));
  if (fault.events == 1) {
    EXPECT_EQ(run.events[0].value("TaskName", ""), "AKS.AKSNodeController.CheckHotfix");
    EXPECT_EQ(run.events[0].value("EventLevel", ""),
              fault.outcome == "failed" ? "Error" : "Informational");
  }
  EXPECT_EQ(OutcomeOf(run), fault.outcome);
  // The log names the fault.
  const std::string& log = fault.log_on_stderr ? run.stderr_text : run.log_file;
  EXPECT_THAT(log, HasSubstr(fault.log_text));
  EXPECT_THAT(log, HasSubstr("check-hotfix completed"));

  // The pointer is old or new, byte for byte, and no temp file is left beside it. (A FIFO
  // left in its place would block the reads below.)
  ASSERT_FALSE(fs::is_fifo(r.PointerPath())) << "the pointer is still a FIFO";
  switch (fault.pointer) {
    case PointerAfter::kOld:
      EXPECT_EQ(ReadFile(r.PointerPath()), kOldPointer);
      break;
    case PointerAfter::kNew:
      EXPECT_EQ(ReadFile(r.PointerPath()), kNewPointer);
      break;
    case PointerAfter::kServedOnly:
      EXPECT_EQ(ReadFile(r.PointerPath()), kServedMap);
      break;
    case PointerAfter::kFallback:
      EXPECT_EQ(ReadFile(r.PointerPath()), kFallbackPointer);
      break;
    case PointerAfter::kAbsent:
      EXPECT_FALSE(fs::exists(r.PointerPath()));
      break;
    case PointerAfter::kDirectory:
      EXPECT_TRUE(fs::is_directory(r.PointerPath()));
      EXPECT_EQ(ReadFile(r.PointerPath() / "keep"), "x");
      break;
  }
  if (fs::is_directory(r.PointerDir())) {
    for (const auto& e : fs::directory_iterator(r.PointerDir())) {
      EXPECT_EQ(e.path().filename().string().rfind(".aks-node-controller-hotfix-", 0),
                std::string::npos)
          << "temp file left behind: " << e.path();
    }
  }
  if (fault.verify) fault.verify(r, run);

  const auto wall_ms = std::chrono::duration_cast<milliseconds>(run.status.wall_time).count();
  std::cout << "[ FAULT    ] " << fault.name << " outcome=" << OutcomeOf(run)
            << " pointer=" << PointerName(fault.pointer) << " wall_ms=" << wall_ms
            << " event=" << (run.events.empty() ? "" : run.events[0].value("Message", ""))
            << std::endl;
  if (const char* report = std::getenv("LP_FAULT_MATRIX_REPORT")) {
    std::ofstream(report, std::ios::app)
        << fault.name << '\t' << OutcomeOf(run) << '\t' << PointerName(fault.pointer) << '\t'
        << fault.log_text << '\t' << wall_ms << '\n';
  }
}

INSTANTIATE_TEST_SUITE_P(FaultMatrix, FaultMatrixTest, ::testing::ValuesIn(Faults()),
                         [](const ::testing::TestParamInfo<Fault>& param) {
                           return param.param.name;
                         });

}  // namespace
}  // namespace hotfix::testsupport
