// FakeLpsServer: a real in-process libgrpc++ server (TLS via grpc::SslServerCredentials)
// implementing akslivepatching.v1.LivePatchingService/GetComponentConfig and
// ReportHotfixOutcome with behaviour a test sets at any time (thread-safe), recording
// everything each call carried.
//
//   FakeLpsServerOptions options;
//   options.cert = IssueLocalServerCert(ca, {kApiserverFqdn});
//   FakeLpsServer lps(std::move(options));
//   lps.SetConfig(R"({"hotfixes":{}})");           // or SetStatus(NOT_FOUND, "..."), SetDelay()
//   ... run the client against 127.0.0.1:lps.port() ...
//   LpsCall call = lps.calls().at(0);  call.Authorization(), call.deadline_remaining, ...
//   lps.SetReportStatus(UNAVAILABLE, "draining");  // or SetReportDelay(); reports() records
//   LpsReport report = lps.reports().at(0);  report.outcome_name, report.call.Authorization()
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "test_certs.h"

namespace hotfix::testsupport {

inline constexpr char kAksNodeControllerComponent[] = "aksNodeController";

struct LpsBehavior {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;  // the grpc-message of a non-OK status
  // Waited before answering; ends early if the client cancels or the server stops.
  std::chrono::milliseconds delay{0};
  std::string config;  // GetComponentConfigResponse.config on OK
  // GetComponentConfigResponse.component_name; nullopt echoes the request's.
  std::optional<std::string> response_component_name;
  // When set, any other component_name gets NOT_FOUND "component <name> not found".
  std::optional<std::string> only_component;
};

struct LpsCall {
  std::string component_name;
  // Every metadata entry the application sees (lower-case keys, binary keys undecoded).
  std::multimap<std::string, std::string> metadata;
  std::string authority;  // :authority
  // ServerContext::deadline() minus arrival time: what the client's grpc-timeout left.
  // nullopt when the client sent no deadline.
  std::optional<std::chrono::milliseconds> deadline_remaining;
  std::string peer;  // "ipv4:127.0.0.1:54321"
  // All auth-context properties. gRPC 1.51 exposes transport_security_type, security_level
  // and ssl_session_reused (plus client-cert fields with mTLS) but not the selected ALPN;
  // the server always picks "h2". Put a HelloTap in front to see what a client offered.
  std::multimap<std::string, std::string> auth_properties;
  std::string transport_security_type;  // "ssl"
  // The client went away while the server delayed its answer (e.g. its deadline passed).
  bool cancelled = false;
  uint64_t sequence = 0;  // 1, 2, ... in order of arrival

  // The first value of a metadata key, "" if absent; Count() for exactly-one checks.
  std::string Metadata(const std::string& key) const;
  size_t Count(const std::string& key) const { return metadata.count(key); }
  std::string Authorization() const { return Metadata("authorization"); }
  std::string UserAgent() const { return Metadata("user-agent"); }
};

// How ReportHotfixOutcome answers (GetComponentConfig's LpsBehavior does not apply to it).
struct LpsReportBehavior {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;  // the grpc-message of a non-OK status
  // Waited before answering; ends early if the client cancels or the server stops.
  std::chrono::milliseconds delay{0};
};

// One ReportHotfixOutcome call: the request's fields, and what the call carried (in `call`,
// whose component_name is the request's).
struct LpsReport {
  LpsCall call;
  std::string base_version;
  std::string hotfix_version;
  int outcome = 0;           // the akslivepatching.v1.HotfixOutcome number
  std::string outcome_name;  // e.g. "HOTFIX_OUTCOME_INSTALLED"
  std::string detail;
};

struct FakeLpsServerOptions {
  CertAndKey cert;  // required: the server's chain and key
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the kernel picks; read port()
  // false: LivePatchingService is not registered; every call gets UNIMPLEMENTED (from
  // gRPC's stock generic service, which a server needs to start without services).
  bool register_service = true;
  LpsBehavior behavior;
  // Called on the serving thread for each call as it arrives (e.g. to log it); concurrent
  // calls invoke it concurrently.
  std::function<void(const LpsCall&)> on_call;
  // 0: keep every call; otherwise only the newest N (long-running demo/benchmark servers).
  size_t max_recorded_calls = 0;
};

// A FakeLpsServer on TLS for 127.0.0.1 and kApiserverFqdn, issued by `ca`.
FakeLpsServerOptions LpsServerOptions(const TestCa& ca);

class FakeLpsServer {
 public:
  // Listening when this returns; throws std::runtime_error if it cannot start.
  explicit FakeLpsServer(FakeLpsServerOptions options);
  ~FakeLpsServer();  // Shutdown(): in-flight calls are cancelled after a short grace
  FakeLpsServer(const FakeLpsServer&) = delete;
  FakeLpsServer& operator=(const FakeLpsServer&) = delete;

  uint16_t port() const { return port_; }
  std::string address() const;  // "127.0.0.1:<port>"

  void SetBehavior(LpsBehavior behavior);
  LpsBehavior behavior() const;
  void SetStatus(grpc::StatusCode code, std::string message = "");
  void SetDelay(std::chrono::milliseconds delay);
  void SetConfig(std::string config);
  void SetOnlyComponent(std::optional<std::string> component);

  void SetReportBehavior(LpsReportBehavior behavior);
  void SetReportStatus(grpc::StatusCode code, std::string message = "");
  void SetReportDelay(std::chrono::milliseconds delay);

  // Every GetComponentConfig call so far, recorded on arrival (before any delay).
  std::vector<LpsCall> calls() const;
  size_t call_count() const;
  bool WaitForCalls(size_t n, std::chrono::milliseconds timeout) const;
  void ClearCalls();

  // Every ReportHotfixOutcome call so far, recorded on arrival (before any delay); on_call
  // and max_recorded_calls do not apply to them.
  std::vector<LpsReport> reports() const;
  size_t report_count() const;
  bool WaitForReports(size_t n, std::chrono::milliseconds timeout) const;

  void Shutdown();

 private:
  class Service;
  friend class Service;
  uint64_t RecordCall(LpsCall call);
  void MarkCancelled(uint64_t sequence);
  uint64_t RecordReport(LpsReport report);
  void MarkReportCancelled(uint64_t sequence);
  LpsReportBehavior report_behavior() const;
  bool stopping() const;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  LpsBehavior behavior_;
  std::function<void(const LpsCall&)> on_call_;
  size_t max_recorded_calls_;
  std::vector<LpsCall> calls_;
  LpsReportBehavior report_behavior_;
  std::vector<LpsReport> reports_;
  uint64_t next_report_sequence_ = 0;
  bool stopping_ = false;
  uint64_t next_sequence_ = 0;
  uint16_t port_ = 0;
  std::string host_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::CallbackGenericService> unknown_methods_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace hotfix::testsupport
