#include "service/live_patching_service.h"

#include "akslivepatching/v1/live_patching.pb.h"
#include "common/text.h"
#include "service/access_log.h"

namespace hotfix::service {
namespace {

using Clock = std::chrono::steady_clock;
using wire::GrpcCode;
using wire::GrpcStatus;

GrpcStatus Refuse(GrpcCode code, std::string message) {
  return GrpcStatus{code, std::move(message), true};
}

// Long enough for any valid name (64) plus a hint of what an invalid one was.
constexpr size_t kMaxEchoedNameBytes = 80;

// A caller-supplied string made safe to echo in a message or log (common/text.h).
std::string Printable(std::string_view s, size_t max = kMaxEchoedNameBytes) {
  return EscapeForMessage(s, max);
}

}  // namespace

LivePatchingServiceImpl::LivePatchingServiceImpl(LivePatchingServiceOptions options)
    : options_(std::move(options)) {
  for (const std::string& s : options_.allowed_subscriptions) allowed_.insert(AsciiLower(s));
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
  decision->status = Refuse(GrpcCode::kUnauthenticated,
                            std::string("node identity not accepted (") +
                                IdentityFailureName(auth.failure) + "): " + auth.error.message());
  return false;
}

bool LivePatchingServiceImpl::Authorize(CallDecision* decision) const {
  if (allowed_.empty() || allowed_.count(AsciiLower(decision->identity.subscription_id)) != 0) {
    return true;
  }
  decision->status = Refuse(GrpcCode::kPermissionDenied,
                            "subscription " + Printable(decision->identity.subscription_id) +
                                " is not allowed to use the live-patching service");
  return false;
}

bool LivePatchingServiceImpl::WithinRate(CallDecision* decision) {
  if (options_.rate_limiter == nullptr || options_.rate_limiter->Allow(decision->identity.vm_id)) {
    return true;
  }
  decision->status = Refuse(GrpcCode::kResourceExhausted,
                            "request rate limit exceeded for node vmId " +
                                Printable(decision->identity.vm_id) + "; retry later");
  return false;
}

bool LivePatchingServiceImpl::Lookup(const CallInput& input, CallDecision* decision) const {
  std::string_view component = input.component_name;
  if (component.empty()) {
    decision->status = Refuse(GrpcCode::kInvalidArgument, "component_name is required");
    return false;
  }
  if (!IsValidComponentName(component)) {
    decision->status =
        Refuse(GrpcCode::kInvalidArgument, "component_name \"" + Printable(component) +
                                               "\" is invalid: it must match "
                                               "[A-Za-z][A-Za-z0-9_.-]{0,63}");
    return false;
  }
  std::shared_ptr<const StoreSnapshot> snapshot = options_.store->Current();
  if (snapshot == nullptr) {
    decision->status =
        Refuse(GrpcCode::kUnavailable, "the component store is not loaded yet; retry later");
    return false;
  }
  decision->generation = snapshot->generation;
  auto it = snapshot->components.find(std::string(component));
  if (it == snapshot->components.end()) {
    decision->status =
        Refuse(GrpcCode::kNotFound, "component \"" + std::string(component) + "\" not found");
    return false;
  }
  decision->metric_component = it->first;
  const ComponentConfig& config = *it->second;
  if (!config.has_rollouts) {
    decision->config = config.text;
    decision->served_hotfixes = config.hotfixes_json;
    return true;
  }
  // The insecure identity is a placeholder, not a node: it buckets nothing and matches no
  // subscription or vmId (docs/ROLLOUTS.md, "Development mode").
  const NodeIdentity& id = decision->identity;
  RolloutNode node = MakeRolloutNode(id.insecure ? "" : id.vm_id,
                                     id.insecure ? "" : id.subscription_id, input.authority);
  decision->config = config.ServedTo(node, RolloutNow(), &decision->applied_rollouts);
  decision->served_hotfixes = decision->config;
  decision->rollout_config = it->second;
  return true;
}

CallDecision LivePatchingServiceImpl::Decide(const CallInput& input) {
  CallDecision decision;
  if (Authenticate(input, &decision) && Authorize(&decision) && WithinRate(&decision) &&
      Lookup(input, &decision)) {
    decision.status = GrpcStatus{};
  }
  return decision;
}

void LivePatchingServiceImpl::Report(const CallInput& input, const CallDecision& decision,
                                     Clock::duration elapsed) {
  if (decision.identity_failure)
    options_.metrics->RecordIdentityFailure(*decision.identity_failure);
  CallSample sample;
  sample.component = decision.metric_component;
  sample.code = decision.status.code;
  sample.seconds = std::chrono::duration<double>(elapsed).count();
  if (decision.authenticated) sample.subscription_id = decision.identity.subscription_id;
  options_.metrics->RecordCall(sample);
  if (options_.rollout_status != nullptr) {
    options_.rollout_status->RecordApplied(decision.generation, decision.metric_component,
                                           decision.applied_rollouts);
  }

  // One line per call, fixed fields so log queries need no optional-field logic. The token
  // is not in CallDecision at all, so it cannot land here.
  AccessLogEntry entry;
  entry.peer = input.peer;
  entry.vm_id = decision.identity.vm_id;
  entry.subscription_id = decision.identity.subscription_id;
  entry.insecure_identity = decision.identity.insecure;
  std::string component = Printable(input.component_name);
  // The host a simulate fleet file needs (docs/ROLLOUTS.md); bounded like the name.
  std::string cluster = Printable(MakeRolloutNode("", "", input.authority).cluster, 255);
  entry.cluster = cluster;
  entry.component = component;
  entry.code = wire::GrpcCodeUpperName(decision.status.code);
  entry.error = decision.status.message;
  entry.identity_failure =
      decision.identity_failure ? IdentityFailureName(*decision.identity_failure) : "";
  entry.generation = decision.generation;
  std::vector<std::string_view> applied;
  for (size_t i : decision.applied_rollouts) {
    applied.push_back(decision.rollout_config->rollouts[i].name);
  }
  entry.rollouts = applied;
  entry.served = decision.served_hotfixes;
  entry.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  options_.access_log->WriteFormatted(
      FormatAccessLogLine(decision.status.ok() ? LogLevel::kInfo : LogLevel::kWarn, entry,
                          std::chrono::system_clock::now()));
}

void LivePatchingServiceImpl::Handle(const GrpcCall& call, GrpcReply* reply) {
  if (call.path != kGetComponentConfigPath) {
    reply->code = GrpcCode::kUnimplemented;
    reply->error_message = "unknown method " + Printable(call.path, 128);
    return;
  }
  Clock::time_point start = Clock::now();
  akslivepatching::v1::GetComponentConfigRequest request;
  if (!request.ParseFromArray(call.message.data(), static_cast<int>(call.message.size()))) {
    // Not ours to decide on: nothing was authenticated, nothing is logged per call.
    reply->code = GrpcCode::kInvalidArgument;
    reply->error_message = "the request is not a GetComponentConfigRequest";
    return;
  }
  CallInput input;
  for (const auto& [key, value] : call.metadata) {
    if (key == "authorization") input.authorization.push_back(value);
  }
  input.component_name = request.component_name();
  input.authority = call.authority;
  input.peer = call.peer;

  CallDecision decision = Decide(input);
  Report(input, decision, Clock::now() - start);
  reply->code = decision.status.code;
  if (decision.status.ok()) {
    akslivepatching::v1::GetComponentConfigResponse response;
    response.set_component_name(request.component_name());
    response.set_config(std::move(decision.config));
    response.SerializeToString(&reply->message);
  } else {
    reply->error_message = std::move(decision.status.message);
  }
  reply->delay = options_.testing_response_delay;
}

}  // namespace hotfix::service
