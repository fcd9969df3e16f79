// Shared by the integration tests that run the real live-patching-service binary: its
// certificates and attested-document signer made here, the process with the ports it reports,
// and small gRPC/HTTP clients for GetComponentConfig, health and /metrics. Header-only, like
// bin_dir.h, because LP_DEFAULT_SOURCE_DIR and LP_DEFAULT_BIN_DIR are defined per integration
// test target; it needs libgrpc++ (lp_testsupport), so no unit test includes it.
//
//   ServiceFiles files;                               // TLS pair, trust roots, components dir
//   files.WriteComponent("aksNodeController", R"({"hotfixes":{}})");
//   ServiceProcess lps(files.Args());                 // serving when this returns
//   GrpcReply r = CallGetComponentConfig(lps.Channel(files), "aksNodeController",
//                                        files.Token());
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "akslivepatching/v1/live_patching.grpc.pb.h"
#include "bin_dir.h"
#include "check_hotfix_run.h"
#include "fake_lps_server.h"
#include "imds_standin.h"
#include "ports.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "text_util.h"
#include "wait.h"

namespace hotfix::testsupport {

inline std::string SourceDir() {
  const char* dir = std::getenv("LP_SOURCE_DIR");
  return dir != nullptr ? dir : LP_DEFAULT_SOURCE_DIR;
}

// A process's resident memory (VmRSS, kB) from /proc; -1 once it is gone (or a zombie).
inline long RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// For tests that bound the service's RSS: under ASan freed memory sits in a 256 MiB
// quarantine that would read as growth; a 16 MiB one keeps RSS about what the service holds.
// The service inherits it. (No effect on a build without ASan.)
inline void LimitAsanQuarantine() {
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::string options = asan ? std::string(asan) + ":" : std::string();
  setenv("ASAN_OPTIONS", (options + "quarantine_size_mb=16").c_str(), 1);
}

// What an operator gets from `sha256sum` of a component file, cut to the 12 hex digits the
// service shows (lp_component_file_info, GET /rollouts, the access log's file_sha256).
inline std::string FileDigest(const std::string& bytes) {
  TempDir dir("file-digest");
  const auto path = dir.Write("f.json", bytes);
  SpawnOptions spawn;
  spawn.argv = {"sha256sum", path.string()};
  RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(10));
  EXPECT_TRUE(r.status.success()) << r.stderr_text;
  return r.stdout_text.substr(0, 12);
}

inline const std::vector<std::string> kMetricsFlags = {"--metrics-listen", "127.0.0.1:0"};

// What the service needs on disk: a TLS pair for kApiserverFqdn from the "cluster CA", the
// attested-document trust roots with a signer under them, and a components folder.
class ServiceFiles {
 public:
  ServiceFiles() {
    tls_ = WritePemFiles(dir_.path(), "tls", IssueLocalServerCert(tls_ca_, {kApiserverFqdn}));
    roots_ = WritePemFile(dir_.path(), "attestation-roots.pem", imds_root_.cert_pem());
    std::filesystem::create_directories(components_dir());
  }

  const TempDir& dir() const { return dir_; }
  const TestCa& tls_ca() const { return tls_ca_; }
  const TestCa& imds_root() const { return imds_root_; }
  const CertAndKey& signer() const { return signer_; }
  const PemPaths& tls() const { return tls_; }
  std::filesystem::path roots() const { return roots_; }
  std::filesystem::path components_dir() const { return dir_.File("components"); }

  // Written atomically (temp file + rename), as a careful operator or a ConfigMap would.
  void WriteComponent(const std::string& name, const std::string& json) const {
    std::filesystem::path tmp = dir_.File(".component.tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << json;
    }
    std::filesystem::rename(tmp, components_dir() / (name + ".json"));
  }

  // The flags every test starts with; ports 0, read back from the service's start-up line.
  // `components` replaces the components folder. No metrics port unless a test adds
  // kMetricsFlags.
  std::vector<std::string> Args(const std::vector<std::string>& extra = {},
                                const std::filesystem::path& components = {}) const {
    std::vector<std::string> args = {BinDir() + "/live-patching-service",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--tls-cert",
                                     tls_.cert.string(),
                                     "--tls-key",
                                     tls_.key.string(),
                                     "--components-dir",
                                     (components.empty() ? components_dir() : components).string(),
                                     "--attestation-roots",
                                     roots_.string(),
                                     "--health-listen",
                                     "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // A signed attested document, by default from the trusted signer for the default node.
  std::string Token(const AttestedDocumentFields& fields = {},
                    const CertAndKey* signer = nullptr) const {
    return SignAttestedContent(AttestedDocumentJson(fields), signer ? *signer : signer_);
  }

 private:
  TempDir dir_{"lp-service"};
  TestCa tls_ca_ = TestCa::Create("test-cluster-ca");
  TestCa imds_root_ = TestCa::Create("test-imds-root");
  CertAndKey signer_ = IssueImdsSigner(imds_root_);
  PemPaths tls_;
  std::filesystem::path roots_;
};

// The real binary. The constructor returns once it logged "live-patching-service serving"
// (ports parsed from that line) or fails the test with what it printed.
class ServiceProcess {
 public:
  explicit ServiceProcess(std::vector<std::string> argv) {
    SpawnOptions spawn;
    spawn.argv = std::move(argv);
    process_ = std::make_unique<Subprocess>(std::move(spawn));
    WaitFor([this] { return Serving() || !process_->running(); }, std::chrono::seconds(30));
    if (!Serving()) {
      ADD_FAILURE() << "live-patching-service did not start ("
                    << (process_->running() ? "still running" : process_->Stop().ToString())
                    << "):\n"
                    << process_->Stderr();
    }
  }

  Subprocess& process() { return *process_; }
  uint16_t port() const { return port_; }
  uint16_t health_port() const { return health_port_; }
  uint16_t metrics_port() const { return metrics_port_; }
  std::string Stderr() const { return process_->Stderr(); }
  std::vector<nlohmann::json> LogLines() const {
    return JsonLines(process_->Stderr(), NonJsonLines::kSkip);
  }

  // The access-log lines ("msg":"GetComponentConfig"), in order.
  std::vector<nlohmann::json> AccessLog() const {
    std::vector<nlohmann::json> out;
    for (auto& l : LogLines()) {
      if (l.value("msg", "") == "GetComponentConfig") out.push_back(l);
    }
    return out;
  }
  bool Logged(const std::string& msg) const {
    for (const auto& l : LogLines()) {
      if (l.value("msg", "") == msg) return true;
    }
    return false;
  }

  // A TLS channel as a well-behaved client: the cluster CA, the service's pinned name.
  // `own` > 0: a channel with connections of its own (gRPC shares a connection between
  // channels whose arguments are equal), as each node has.
  std::shared_ptr<grpc::Channel> Channel(const ServiceFiles& files, int own = 0) const {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = files.tls_ca().cert_pem();
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(kApiserverFqdn);
    if (own > 0) args.SetInt("lp.test.own_channel", own);
    return grpc::CreateCustomChannel(LoopbackAddress(port_), grpc::SslCredentials(tls), args);
  }
  std::shared_ptr<grpc::Channel> HealthChannel() const {
    return grpc::CreateChannel(LoopbackAddress(health_port_), grpc::InsecureChannelCredentials());
  }

 private:
  bool Serving() {
    for (const auto& l : LogLines()) {
      if (l.value("msg", "") != "live-patching-service serving") continue;
      port_ = l.value("port", 0);
      health_port_ = l.value("health_port", 0);
      metrics_port_ = l.value("metrics_port", 0);
      return port_ != 0;
    }
    return false;
  }

  std::unique_ptr<Subprocess> process_;
  uint16_t port_ = 0;
  uint16_t health_port_ = 0;
  uint16_t metrics_port_ = 0;
};

struct GrpcReply {
  grpc::Status status;
  akslivepatching::v1::GetComponentConfigResponse response;
  grpc::StatusCode code() const { return status.error_code(); }
};

inline GrpcReply CallGetComponentConfig(const std::shared_ptr<grpc::Channel>& channel,
                                        const std::string& component,
                                        const std::optional<std::string>& token) {
  auto stub = akslivepatching::v1::LivePatchingService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (token) ctx.AddMetadata("authorization", *token);
  akslivepatching::v1::GetComponentConfigRequest request;
  request.set_component_name(component);
  GrpcReply reply;
  reply.status = stub->GetComponentConfig(&ctx, request, &reply.response);
  return reply;
}

// ---- A node: its bootstrap files and hotfix-agent check-hotfix runs -----------------------

struct AgentRun {
  RunResult result;
  std::vector<nlohmann::json> events;
  // The one event's message ("check-hotfix outcome=... | ..."), "" if there is not exactly one.
  std::string Message() const {
    return events.size() == 1 ? events[0].value("Message", "") : std::string();
  }
};

// The real hotfix-agent as a node runs it: AKSNodeConfig naming the apiserver and the
// cluster CA, the pointer, events and log under a temp folder.
class NodeAgent {
 public:
  explicit NodeAgent(const TestCa& cluster_ca) {
    dir_.Write("config.json", NodeConfigJson(kApiserverFqdn, cluster_ca.cert_pem()).dump());
  }
  const TempDir& dir() const { return dir_; }
  std::filesystem::path pointer() const { return dir_.File("hotfix.json"); }

  AgentRun CheckHotfix(const std::string& imds_url, const std::string& connect_to) const {
    CheckHotfixArgs args;
    args.node_config = dir_.File("config.json");
    args.nbc_cmd = dir_.File("nbc-cmd.sh");
    args.pointer = pointer();
    args.imds_url = imds_url;
    args.connect_to = connect_to;
    args.events_dir = dir_.File("events");
    args.log_file = dir_.File("agent.log");
    std::filesystem::remove_all(args.events_dir);
    AgentRun run;
    run.result = RunProcess(CheckHotfixSpawn(args), std::chrono::seconds(60));
    run.events = ReadEventFiles(args.events_dir);
    return run;
  }

 private:
  TempDir dir_{"lp-node"};
};

// ---- Raw protobuf for the two standard services whose generated code Debian does not ship --

inline std::string ProtoStringField(int field, const std::string& value) {
  std::string out(1, static_cast<char>((field << 3) | 2));
  for (size_t n = value.size();; n >>= 7) {
    out += static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    if (n <= 0x7f) break;
  }
  return out + value;
}

inline std::string ByteBufferToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

inline grpc::ByteBuffer StringToByteBuffer(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

// A client bidi/unary call on a completion queue, driven step by step.
class RawCall {
 public:
  RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
          std::multimap<std::string, std::string> metadata = {})
      : stub_(channel) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    for (const auto& [k, v] : metadata) ctx_.AddMetadata(k, v);
    call_ = stub_.PrepareCall(&ctx_, method, &cq_);
  }
  ~RawCall() {
    ctx_.TryCancel();
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  // Sends the headers now; the request may follow much later.
  bool Start() {
    call_->StartCall(Tag(1));
    return Await(1);
  }
  bool Send(const std::string& message) {
    call_->Write(StringToByteBuffer(message), Tag(2));
    if (!Await(2)) return false;
    call_->WritesDone(Tag(3));
    return Await(3);
  }
  std::optional<std::string> Receive() {
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, Tag(4));
    if (!Await(4)) return std::nullopt;
    return ByteBufferToString(buffer);
  }
  grpc::Status Finish() {
    grpc::Status status;
    call_->Finish(&status, Tag(5));
    Await(5);
    return status;
  }

 private:
  static void* Tag(intptr_t n) { return reinterpret_cast<void*>(n); }
  bool Await(intptr_t want) {
    void* tag = nullptr;
    bool ok = false;
    auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(30);
    while (cq_.AsyncNext(&tag, &ok, deadline) == grpc::CompletionQueue::GOT_EVENT) {
      if (tag == Tag(want)) return ok;
    }
    return false;
  }

  grpc::GenericStub stub_;
  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
};

// grpc.health.v1.Health/Check: 1 SERVING, 2 NOT_SERVING; nullopt with the call's failure.
inline std::optional<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                      const std::string& service, grpc::Status* status = nullptr) {
  RawCall call(channel, "/grpc.health.v1.Health/Check");
  std::optional<std::string> reply;
  if (call.Start() && call.Send(service.empty() ? "" : ProtoStringField(1, service))) {
    reply = call.Receive();
  }
  grpc::Status st = call.Finish();
  if (status) *status = st;
  if (!st.ok() || !reply) return std::nullopt;
  // HealthCheckResponse{status = 1 (varint)}; an empty message is UNKNOWN (0).
  return reply->size() >= 2 && (*reply)[0] == 0x08 ? (*reply)[1] : 0;
}

// ---- Prometheus text format --------------------------------------------------------------

inline std::string HttpGet(uint16_t port, const std::string& path, int* status = nullptr) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(10);
  client.set_read_timeout(10);
  auto res = client.Get(path.c_str());
  if (status) *status = res ? res->status : -1;
  return res ? res->body : std::string();
}

// The value of the sample `name{...}` whose labels include every one given; nullopt if absent.
inline std::optional<double> MetricValue(const std::string& text, const std::string& name,
                                         const std::map<std::string, std::string>& labels = {}) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0) continue;
    size_t rest = name.size();
    if (rest < line.size() && line[rest] != '{' && line[rest] != ' ') continue;
    bool all = true;
    for (const auto& [k, v] : labels) {
      if (line.find(k + "=\"" + v + "\"") == std::string::npos) all = false;
    }
    if (!all) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

}  // namespace hotfix::testsupport
