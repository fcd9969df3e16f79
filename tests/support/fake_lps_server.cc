#include "fake_lps_server.h"

#include <stdexcept>
#include <thread>

#include "akslivepatching/v1/live_patching.grpc.pb.h"

namespace hotfix::testsupport {

namespace pb = ::akslivepatching::v1;

std::string LpsCall::Metadata(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? "" : it->second;
}

namespace {

std::string ToString(grpc::string_ref s) { return std::string(s.data(), s.size()); }

// What is left of the client's deadline; nullopt for "none" (gRPC reports a far-future one).
std::optional<std::chrono::milliseconds> RemainingDeadline(const grpc::ServerContext& ctx) {
  auto left = ctx.deadline() - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(left);
}

LpsCall DescribeCall(const grpc::ServerContext& ctx, const std::string& component_name) {
  LpsCall call;
  call.component_name = component_name;
  for (const auto& [key, value] : ctx.client_metadata()) {
    call.metadata.emplace(ToString(key), ToString(value));
  }
  call.authority = ToString(ctx.ExperimentalGetAuthority());
  call.deadline_remaining = RemainingDeadline(ctx);
  call.peer = ctx.peer();
  if (auto auth = ctx.auth_context()) {
    for (const auto& [key, value] : *auth) {
      call.auth_properties.emplace(ToString(key), ToString(value));
    }
  }
  auto it = call.auth_properties.find("transport_security_type");
  if (it != call.auth_properties.end()) call.transport_security_type = it->second;
  return call;
}

}  // namespace

class FakeLpsServer::Service final : public pb::LivePatchingService::Service {
 public:
  explicit Service(FakeLpsServer& owner) : owner_(owner) {}

  grpc::Status GetComponentConfig(grpc::ServerContext* ctx,
                                  const pb::GetComponentConfigRequest* req,
                                  pb::GetComponentConfigResponse* resp) override {
    // Recorded on arrival so tests can see a call that is still being delayed.
    uint64_t sequence = owner_.RecordCall(DescribeCall(*ctx, req->component_name()));
    LpsBehavior behavior = owner_.behavior();
    SleepUnlessCancelled(*ctx, behavior.delay);
    if (ctx->IsCancelled()) owner_.MarkCancelled(sequence);
    if (behavior.only_component && req->component_name() != *behavior.only_component) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "component " + req->component_name() + " not found");
    }
    if (behavior.code != grpc::StatusCode::OK) return grpc::Status(behavior.code, behavior.message);
    resp->set_component_name(behavior.response_component_name.value_or(req->component_name()));
    resp->set_config(behavior.config);
    return grpc::Status::OK;
  }

  grpc::Status ReportHotfixOutcome(grpc::ServerContext* ctx,
                                   const pb::ReportHotfixOutcomeRequest* req,
                                   pb::ReportHotfixOutcomeResponse*) override {
    LpsReport report;
    report.call = DescribeCall(*ctx, req->component_name());
    report.base_version = req->base_version();
    report.hotfix_version = req->hotfix_version();
    report.outcome = req->outcome();
    report.outcome_name = pb::HotfixOutcome_Name(req->outcome());
    report.detail = req->detail();
    uint64_t sequence = owner_.RecordReport(std::move(report));
    LpsReportBehavior behavior = owner_.report_behavior();
    SleepUnlessCancelled(*ctx, behavior.delay);
    if (ctx->IsCancelled()) owner_.MarkReportCancelled(sequence);
    if (behavior.code != grpc::StatusCode::OK) return grpc::Status(behavior.code, behavior.message);
    return grpc::Status::OK;
  }

 private:
  // Sleeps in short slices so a cancelled call or a stopping server ends the wait at once.
  void SleepUnlessCancelled(grpc::ServerContext& ctx, std::chrono::milliseconds delay) {
    auto until = std::chrono::steady_clock::now() + delay;
    while (std::chrono::steady_clock::now() < until && !ctx.IsCancelled() && !owner_.stopping()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  FakeLpsServer& owner_;
};

FakeLpsServer::FakeLpsServer(FakeLpsServerOptions options)
    : behavior_(std::move(options.behavior)),
      on_call_(std::move(options.on_call)),
      max_recorded_calls_(options.max_recorded_calls),
      host_(options.host) {
  grpc::SslServerCredentialsOptions tls;
  tls.pem_key_cert_pairs.push_back({options.cert.key_pem, options.cert.cert_pem});
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(host_ + ":" + std::to_string(options.port),
                           grpc::SslServerCredentials(tls), &selected_port);
  if (options.register_service) {
    service_ = std::make_unique<Service>(*this);
    builder.RegisterService(service_.get());
  } else {
    // A server without any service refuses to start. gRPC's stock generic service (its
    // default reactor answers UNIMPLEMENTED) lets it run with LivePatchingService unknown.
    unknown_methods_ = std::make_unique<grpc::CallbackGenericService>();
    builder.RegisterCallbackGenericService(unknown_methods_.get());
  }
  server_ = builder.BuildAndStart();
  if (!server_ || selected_port == 0) {
    throw std::runtime_error("FakeLpsServer could not listen on " + host_ + ":" +
                             std::to_string(options.port));
  }
  port_ = static_cast<uint16_t>(selected_port);
}

FakeLpsServer::~FakeLpsServer() { Shutdown(); }

void FakeLpsServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
}

std::string FakeLpsServer::address() const { return host_ + ":" + std::to_string(port_); }

bool FakeLpsServer::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

void FakeLpsServer::SetBehavior(LpsBehavior behavior) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_ = std::move(behavior);
}

LpsBehavior FakeLpsServer::behavior() const {
  std::lock_guard<std::mutex> lock(mu_);
  return behavior_;
}

void FakeLpsServer::SetStatus(grpc::StatusCode code, std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.code = code;
  behavior_.message = std::move(message);
}

void FakeLpsServer::SetDelay(std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.delay = delay;
}

void FakeLpsServer::SetConfig(std::string config) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.config = std::move(config);
}

void FakeLpsServer::SetOnlyComponent(std::optional<std::string> component) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.only_component = std::move(component);
}

void FakeLpsServer::SetReportBehavior(LpsReportBehavior behavior) {
  std::lock_guard<std::mutex> lock(mu_);
  report_behavior_ = std::move(behavior);
}

void FakeLpsServer::SetReportStatus(grpc::StatusCode code, std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  report_behavior_.code = code;
  report_behavior_.message = std::move(message);
}

void FakeLpsServer::SetReportDelay(std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  report_behavior_.delay = delay;
}

LpsReportBehavior FakeLpsServer::report_behavior() const {
  std::lock_guard<std::mutex> lock(mu_);
  return report_behavior_;
}

uint64_t FakeLpsServer::RecordReport(LpsReport report) {
  std::lock_guard<std::mutex> lock(mu_);
  report.call.sequence = ++next_report_sequence_;
  const uint64_t sequence = report.call.sequence;
  reports_.push_back(std::move(report));
  changed_.notify_all();
  return sequence;
}

void FakeLpsServer::MarkReportCancelled(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& report : reports_) {
    if (report.call.sequence == sequence) report.call.cancelled = true;
  }
  changed_.notify_all();
}

std::vector<LpsReport> FakeLpsServer::reports() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reports_;
}

size_t FakeLpsServer::report_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reports_.size();
}

bool FakeLpsServer::WaitForReports(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return reports_.size() >= n; });
}

uint64_t FakeLpsServer::RecordCall(LpsCall call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    call.sequence = ++next_sequence_;
  }
  if (on_call_) on_call_(call);  // outside the lock: logging must not serialize calls
  uint64_t sequence = call.sequence;
  std::lock_guard<std::mutex> lock(mu_);
  // A long benchmark run must not grow without bound: keep only the newest calls.
  if (max_recorded_calls_ > 0 && calls_.size() >= max_recorded_calls_) {
    calls_.erase(calls_.begin());
  }
  calls_.push_back(std::move(call));
  changed_.notify_all();
  return sequence;
}

void FakeLpsServer::MarkCancelled(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& call : calls_) {
    if (call.sequence == sequence) call.cancelled = true;
  }
  changed_.notify_all();
}

std::vector<LpsCall> FakeLpsServer::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

size_t FakeLpsServer::call_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_.size();
}

bool FakeLpsServer::WaitForCalls(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return calls_.size() >= n; });
}

void FakeLpsServer::ClearCalls() {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.clear();
}

FakeLpsServerOptions LpsServerOptions(const TestCa& ca) {
  FakeLpsServerOptions options;
  options.cert = IssueLocalServerCert(ca, {kApiserverFqdn});
  return options;
}

}  // namespace hotfix::testsupport
