#include "service/live_patching_service.h"

#include <grpcpp/alarm.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "service/access_log.h"

namespace hotfix::service {
namespace {

using Clock = std::chrono::steady_clock;

// Long enough for any valid name (64) plus a hint of what an invalid one was.
constexpr size_t kMaxEchoedNameBytes = 80;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A caller-supplied string made safe to echo in a message or log: printable ASCII, anything
// else as \xNN, cut at max bytes.
std::string Printable(std::string_view s, size_t max = kMaxEchoedNameBytes) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

// Finishes a call after a delay on gRPC's timer, for the test hook. Owns itself: gRPC calls
// OnDone() once the status is sent (or the call died), and nothing touches it after that.
class DelayedFinish final : public grpc::ServerUnaryReactor {
 public:
  DelayedFinish(grpc::Status status, std::chrono::milliseconds delay) : status_(std::move(status)) {
    alarm_.Set(std::chrono::system_clock::now() + delay, [this](bool) { Finish(status_); });
  }
  // A cancelled call (client gone, or the drain's grace over) is finished at once.
  void OnCancel() override { alarm_.Cancel(); }
  void OnDone() override { delete this; }

 private:
  grpc::Status status_;
  grpc::Alarm alarm_;
};

}  // namespace

LivePatchingServiceImpl::LivePatchingServiceImpl(LivePatchingServiceOptions options)
    : options_(std::move(options)) {
  for (const std::string& s : options_.allowed_subscriptions) allowed_.insert(Lower(s));
}

bool LivePatchingServiceImpl::Authenticate(const CallInput& input, CallDecision* decision) {
  AuthResult auth;
  if (input.authorization.size() > 1) {
    // Two credentials are ambiguous: which one is the caller? Refuse rather than pick.
    auth.failure = IdentityFailure::kMalformed;
    auth.error = Status::InvalidArgument("more than one authorization metadata entry");
  } else {
    auth = options_.authenticator->Authenticate(
        input.authorization.empty() ? std::string_view() : input.authorization.front());
  }
  if (auth.ok()) {
    decision->identity = std::move(auth.identity);
    decision->authenticated = true;
    return true;
  }
  decision->identity_failure = auth.failure;
  decision->status =
      grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string("node identity not accepted (") +
                                                          IdentityFailureName(auth.failure) +
                                                          "): " + auth.error.message());
  return false;
}

bool LivePatchingServiceImpl::Authorize(CallDecision* decision) const {
  if (allowed_.empty() || allowed_.count(Lower(decision->identity.subscription_id)) != 0) {
    return true;
  }
  decision->status = grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                  "subscription " + Printable(decision->identity.subscription_id) +
                                      " is not allowed to use the live-patching service");
  return false;
}

bool LivePatchingServiceImpl::WithinRate(CallDecision* decision) {
  if (options_.rate_limiter == nullptr || options_.rate_limiter->Allow(decision->identity.vm_id)) {
    return true;
  }
  decision->status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "request rate limit exceeded for node vmId " +
                                      Printable(decision->identity.vm_id) + "; retry later");
  return false;
}

bool LivePatchingServiceImpl::Lookup(std::string_view component, CallDecision* decision) const {
  if (component.empty()) {
    decision->status =
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "component_name is required");
    return false;
  }
  if (!IsValidComponentName(component)) {
    decision->status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "component_name \"" + Printable(component) +
                                        "\" is invalid: it must match "
                                        "[A-Za-z][A-Za-z0-9_.-]{0,63}");
    return false;
  }
  std::shared_ptr<const StoreSnapshot> snapshot = options_.store->Current();
  if (snapshot == nullptr) {
    decision->status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "the component store is not loaded yet; retry later");
    return false;
  }
  auto it = snapshot->config.find(std::string(component));
  if (it == snapshot->config.end()) {
    decision->status = grpc::Status(grpc::StatusCode::NOT_FOUND,
                                    "component \"" + std::string(component) + "\" not found");
    return false;
  }
  decision->metric_component = it->first;
  decision->config = it->second;
  return true;
}

CallDecision LivePatchingServiceImpl::Decide(const CallInput& input) {
  CallDecision decision;
  if (Authenticate(input, &decision) && Authorize(&decision) && WithinRate(&decision) &&
      Lookup(input.component_name, &decision)) {
    decision.status = grpc::Status::OK;
  }
  return decision;
}

void LivePatchingServiceImpl::Report(const CallInput& input, const CallDecision& decision,
                                     Clock::duration elapsed) {
  if (decision.identity_failure)
    options_.metrics->RecordIdentityFailure(*decision.identity_failure);
  CallSample sample;
  sample.component = decision.metric_component;
  sample.code = decision.status.error_code();
  sample.seconds = std::chrono::duration<double>(elapsed).count();
  if (decision.authenticated) sample.subscription_id = decision.identity.subscription_id;
  options_.metrics->RecordCall(sample);

  // One line per call, fixed fields so log queries need no optional-field logic. The token
  // is not in CallDecision at all, so it cannot land here.
  AccessLogEntry entry;
  entry.peer = input.peer;
  entry.vm_id = decision.identity.vm_id;
  entry.subscription_id = decision.identity.subscription_id;
  entry.insecure_identity = decision.identity.insecure;
  std::string component = Printable(input.component_name);
  entry.component = component;
  entry.code = StatusCodeName(decision.status.error_code());
  const std::string error = decision.status.error_message();  // grpc::Status returns a copy
  entry.error = error;
  entry.identity_failure =
      decision.identity_failure ? IdentityFailureName(*decision.identity_failure) : "";
  entry.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  options_.access_log->WriteFormatted(
      FormatAccessLogLine(decision.status.ok() ? LogLevel::kInfo : LogLevel::kWarn, entry,
                          std::chrono::system_clock::now()));
}

grpc::ServerUnaryReactor* LivePatchingServiceImpl::GetComponentConfig(
    grpc::CallbackServerContext* context,
    const akslivepatching::v1::GetComponentConfigRequest* request,
    akslivepatching::v1::GetComponentConfigResponse* response) {
  Clock::time_point start = Clock::now();
  CallInput input;
  auto [first, last] = context->client_metadata().equal_range("authorization");
  for (auto it = first; it != last; ++it) {
    input.authorization.emplace_back(it->second.data(), it->second.size());
  }
  input.component_name = request->component_name();
  std::string peer = context->peer();
  input.peer = peer;

  CallDecision decision = Decide(input);
  if (decision.status.ok()) {
    response->set_component_name(request->component_name());
    response->set_config(std::move(decision.config));
  }
  Report(input, decision, Clock::now() - start);
  if (options_.testing_response_delay.count() > 0) {
    return new DelayedFinish(decision.status, options_.testing_response_delay);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(decision.status);
  return reactor;
}

}  // namespace hotfix::service
