#include "service/live_patching_service.h"

#include <algorithm>

#include "akslivepatching/v1/live_patching.pb.h"
#include "common/text.h"
#include "service/ops/access_log.h"

namespace hotfix::service {
namespace {

using Clock = std::chrono::steady_clock;
using wire::GrpcCode;
using wire::GrpcStatus;

GrpcStatus Refuse(GrpcCode code, std::string message) {
  return GrpcStatus{code, std::move(message)};
}

// Long enough for any valid name (64) plus a hint of what an invalid one was.
constexpr size_t kMaxEchoedNameBytes = 80;

// A caller-supplied string made safe to echo in a message or log (common/text.h).
std::string Printable(std::string_view s, size_t max = kMaxEchoedNameBytes) {
  return EscapeForMessage(s, max);
}

// The node as rollouts see it. The insecure identity is a placeholder, not a node: it
// buckets nothing and matches no subscription or vmId (docs/ROLLOUTS.md, "Development mode").
RolloutNode NodeOf(const NodeIdentity& id, const std::string& cluster) {
  RolloutNode node =
      MakeRolloutNode(id.insecure ? "" : id.vm_id, id.insecure ? "" : id.subscription_id, "");
  node.cluster = cluster;  // CallDecision::cluster, made once per call
  return node;
}

// Fills in input from a request of `path`; false when the bytes are not that request.
bool ParseRequest(const GrpcCall& call, akslivepatching::v1::GetComponentConfigRequest* get,
                  akslivepatching::v1::ReportHotfixOutcomeRequest* report, CallInput* input) {
  const int size = static_cast<int>(call.message.size());
  if (call.path == contract::kGetComponentConfigPath) {
    if (!get->ParseFromArray(call.message.data(), size)) return false;
    input->component_name = get->component_name();
    return true;
  }
  if (!report->ParseFromArray(call.message.data(), size)) return false;
  input->component_name = report->component_name();
  input->report = OutcomeReport{report->base_version(), report->hotfix_version(),
                                static_cast<int>(report->outcome()), report->detail()};
  return true;
}

// What no real node sends (the document missing, not one, or not IMDS's): evidence against
// the caller's address. An expired document is what a node with a slow clock or a stale
// retry sends, and a subscription off the allow-list is a real node of another customer: a
// node behind the same address (a NAT) must not be shed for either.
bool CallerAtFault(IdentityFailure failure) {
  switch (failure) {
    case IdentityFailure::kMissing:
    case IdentityFailure::kMalformed:
    case IdentityFailure::kUntrustedSigner:
    case IdentityFailure::kWrongSigner:
    case IdentityFailure::kBadContent:
      return true;
    case IdentityFailure::kExpired:
      return false;
  }
  return false;
}

}  // namespace

LivePatchingServiceImpl::LivePatchingServiceImpl(LivePatchingServiceOptions options)
    : options_(std::move(options)) {
  for (size_t i = 0; i < kIdentityFailures + kGrpcCodes; ++i) {
    refusal_lines_.emplace_back(kRefusalLinesPerSecond, std::chrono::seconds(1));
  }
  for (std::string& pattern : options_.allowed_authorities) pattern = AsciiLower(pattern);
}

GrpcStatus LivePatchingServiceImpl::Authenticate(const CallInput& input, CallDecision* decision,
                                                 std::optional<IdentityCacheTicket>* remember) {
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
    *remember = auth.remember;
    decision->identity = std::move(auth.identity);
    decision->authenticated = true;
    return GrpcStatus{};
  }
  decision->identity_failure = auth.failure;
  return Refuse(GrpcCode::kUnauthenticated, std::string("node identity not accepted (") +
                                                IdentityFailureName(auth.failure) +
                                                "): " + auth.error.message());
}

GrpcStatus LivePatchingServiceImpl::Authorize(const std::string& cluster,
                                              const NodeIdentity& identity) const {
  if (options_.allowed_subscriptions != nullptr &&
      !options_.allowed_subscriptions->Allows(identity.subscription_id)) {
    return Refuse(GrpcCode::kPermissionDenied,
                  "subscription " + Printable(identity.subscription_id) +
                      " is not allowed to use the live-patching service");
  }
  const std::vector<std::string>& patterns = options_.allowed_authorities;
  if (patterns.empty()) return GrpcStatus{};
  if (std::any_of(patterns.begin(), patterns.end(),
                  [&](const std::string& p) { return MatchesClusterPattern(p, cluster); })) {
    return GrpcStatus{};
  }
  return Refuse(GrpcCode::kPermissionDenied,
                "authority " + Printable(cluster) + " matches no --allowed-authorities pattern");
}

GrpcStatus LivePatchingServiceImpl::WithinRate(const NodeIdentity& identity) {
  if (options_.rate_limiter == nullptr || options_.rate_limiter->Allow(identity.vm_id)) {
    return GrpcStatus{};
  }
  return Refuse(GrpcCode::kResourceExhausted, "request rate limit exceeded for node vmId " +
                                                  Printable(identity.vm_id) + "; retry later");
}

GrpcStatus LivePatchingServiceImpl::FindComponent(const CallInput& input,
                                                  CallDecision* decision) const {
  std::string_view component = input.component_name;
  if (component.empty()) return Refuse(GrpcCode::kInvalidArgument, "component_name is required");
  if (!IsValidComponentName(component)) {
    return Refuse(GrpcCode::kInvalidArgument, "component_name \"" + Printable(component) +
                                                  "\" is invalid: it must match "
                                                  "[A-Za-z][A-Za-z0-9_.-]{0,63}");
  }
  std::shared_ptr<const StoreSnapshot> snapshot = options_.store->Current();
  if (snapshot == nullptr) {
    return Refuse(GrpcCode::kUnavailable, "the component store is not loaded yet; retry later");
  }
  decision->generation = snapshot->generation;
  auto it = snapshot->components.find(std::string(component));
  if (it == snapshot->components.end()) {
    return Refuse(GrpcCode::kNotFound, "component \"" + std::string(component) + "\" not found");
  }
  decision->metric_component = it->first;
  decision->rollout_config = it->second;  // keeps the config alive past the snapshot
  return GrpcStatus{};
}

GrpcStatus LivePatchingServiceImpl::Lookup(const CallInput& input, CallDecision* decision) const {
  if (GrpcStatus found = FindComponent(input, decision); !found.ok()) return found;
  const ComponentConfig& config = *decision->rollout_config;
  if (!config.has_rollouts) {
    decision->config = config.text;
    decision->served_hotfixes = config.hotfixes_json;
    return GrpcStatus{};
  }
  decision->config = config.ServedTo(NodeOf(decision->identity, decision->cluster), RolloutNow(),
                                     &decision->applied_rollouts);
  decision->served_hotfixes = decision->config;
  return GrpcStatus{};
}

GrpcStatus LivePatchingServiceImpl::CheckReport(const OutcomeReport& report,
                                                CallDecision* decision) const {
  auto invalid = [](std::string message) {
    return Refuse(GrpcCode::kInvalidArgument, std::move(message));
  };
  if (!IsHotfixBase(report.base_version)) {
    return invalid("base_version \"" + Printable(report.base_version) + "\" is not YYYYMM.DD");
  }
  if (!IsHotfixVersion(report.hotfix_version)) {
    return invalid("hotfix_version \"" + Printable(report.hotfix_version) +
                   "\" is not YYYYMM.DD.PATCH");
  }
  if (report.hotfix_version.substr(0, report.base_version.size()) != report.base_version) {
    return invalid("hotfix_version \"" + std::string(report.hotfix_version) +
                   "\" is not of base_version \"" + std::string(report.base_version) + "\"");
  }
  // 0 (unset) and values this service's proto does not define are refused, not guessed.
  if (!contract::IsReportedOutcome(report.outcome)) {
    return invalid("outcome " + std::to_string(report.outcome) + " is not a known HotfixOutcome");
  }
  if (report.detail.size() > kMaxReportDetailBytes) {
    return invalid("detail is " + std::to_string(report.detail.size()) + " bytes, more than " +
                   std::to_string(kMaxReportDetailBytes));
  }
  for (unsigned char c : report.detail) {
    if (c < 0x20 || c > 0x7e) return invalid("detail is not printable ASCII");
  }
  decision->reported = static_cast<contract::Outcome>(report.outcome);
  return GrpcStatus{};
}

void LivePatchingServiceImpl::CountReport(const CallInput& input, CallDecision* decision) {
  const OutcomeReport& report = *input.report;
  // As the file says, whatever the automatic halt judged: a halted rollout's nodes still
  // report how its hotfix went.
  const ComponentConfig& config =
      decision->rollout_config->file ? *decision->rollout_config->file : *decision->rollout_config;
  if (config.has_rollouts) {
    // The rollouts that serve this node now by the file (the answer's pure function, without
    // the served JSON, which a report does not send), and of those the ones that name the
    // reported version for its base.
    const RolloutAnswer answer =
        AnswerFor(*config.hotfixes, config.rollouts, NodeOf(decision->identity, decision->cluster),
                  RolloutNow());
    for (size_t i : answer.applied) {
      auto version = config.rollouts[i].hotfixes.find(std::string(report.base_version));
      if (version != config.rollouts[i].hotfixes.end() &&
          version->second == report.hotfix_version) {
        decision->applied_rollouts.push_back(i);
      }
    }
  }
  // Nodes, for the halt's evidence: whatever this node sends, however often, it is one node
  // in each set (node_evidence.h), so no repeat is dropped here. A verified vmId names one
  // node; without one (insecure mode) nothing tells nodes apart. Hashed once per report.
  if (options_.node_evidence != nullptr && !decision->identity.vm_id.empty()) {
    std::optional<NodeEvidence::Reporter> reporter;
    auto add = [&](const EvidenceKey& key) {
      if (!reporter) {
        reporter = NodeEvidence::HashReporter(decision->identity.vm_id,
                                              decision->identity.subscription_id);
      }
      options_.node_evidence->Add(key, *reporter, contract::IsFailure(*decision->reported));
    };
    const RolloutTime now = RolloutNow();
    for (size_t i : decision->applied_rollouts) {
      const Rollout& rollout = config.rollouts[i];
      const RolloutTime auto_halt_since = AutoHaltSince(rollout);
      if (rollout.auto_halt) add({decision->metric_component, rollout.name, auto_halt_since});
      if (HasGates(rollout)) {
        // The window of the step in force, as judged (the gates' starts), where a waiting
        // gate counts its nodes (auto_halt_controller.h).
        const RolloutTime since = CurrentStepStart(decision->rollout_config->rollouts[i], now);
        if (!rollout.auto_halt || since != auto_halt_since) {
          add({decision->metric_component, rollout.name, since});
        }
      }
    }
  }
  // The reports counter (for dashboards) drops a repeat of the same result to this replica.
  if (options_.recent_reports != nullptr && !decision->identity.vm_id.empty()) {
    std::string key = AsciiLower(decision->identity.vm_id);
    key.append(1, '|').append(report.hotfix_version).append(1, '|');
    key.append(contract::OutcomeLabel(*decision->reported));
    decision->duplicate = !options_.recent_reports->FirstSeen(key);
  }
  if (decision->duplicate) return;
  if (decision->applied_rollouts.empty()) {
    options_.metrics->RecordOutcome(decision->metric_component, "", *decision->reported);
  }
  for (size_t i : decision->applied_rollouts) {
    options_.metrics->RecordOutcome(decision->metric_component, config.rollouts[i].name,
                                    *decision->reported);
  }
}

CallDecision LivePatchingServiceImpl::Decide(const CallInput& input) {
  CallDecision decision;
  decision.cluster = MakeRolloutNode("", "", input.authority).cluster;
  std::optional<IdentityCacheTicket> remember;
  decision.status = Authenticate(input, &decision, &remember);
  // A verified document is kept whatever is decided after it: a document that is not allowed
  // (PERMISSION_DENIED) or over its rate, replayed, then costs a hash and a lookup as a
  // refused one does, not a signature check each time; the allow-lists and the rate are
  // applied afresh to every call.
  if (remember) options_.authenticator->Admit(decision.identity, *remember);
  if (decision.status.ok()) decision.status = Authorize(decision.cluster, decision.identity);
  if (decision.status.ok()) decision.status = WithinRate(decision.identity);
  if (!decision.status.ok()) return decision;
  if (!input.report) {
    decision.status = Lookup(input, &decision);
    return decision;
  }
  decision.status = FindComponent(input, &decision);
  if (decision.status.ok()) decision.status = CheckReport(*input.report, &decision);
  if (decision.status.ok()) CountReport(input, &decision);
  return decision;
}

LogBudget& LivePatchingServiceImpl::RefusalLines(const CallDecision& decision) {
  if (decision.identity_failure) {
    return refusal_lines_[static_cast<size_t>(*decision.identity_failure) % kIdentityFailures];
  }
  return refusal_lines_[kIdentityFailures + static_cast<size_t>(decision.status.code) % kGrpcCodes];
}

void LivePatchingServiceImpl::Report(const CallInput& input, const CallDecision& decision,
                                     Clock::duration elapsed) {
  if (decision.identity_failure)
    options_.metrics->RecordIdentityFailure(*decision.identity_failure);
  CallSample sample;
  sample.component = decision.metric_component;
  sample.code = decision.status.code;
  sample.method = input.report ? "ReportHotfixOutcome" : "GetComponentConfig";
  sample.seconds = std::chrono::duration<double>(elapsed).count();
  if (decision.authenticated) sample.subscription_id = decision.identity.subscription_id;
  options_.metrics->RecordCall(sample);
  if (options_.rollout_status != nullptr && !input.report) {
    options_.rollout_status->RecordApplied(decision.generation, decision.metric_component,
                                           decision.applied_rollouts);
  }

  // One line per call, fixed fields so log queries need no optional-field logic. The token
  // is not in CallDecision at all, so it cannot land here. Refusals are WARN: --log-level
  // warn keeps them and drops the OK calls' lines.
  const LogLevel level = decision.status.ok() ? LogLevel::kInfo : LogLevel::kWarn;
  if (!options_.access_log->Enabled(level)) return;
  AccessLogEntry entry;
  if (!decision.status.ok()) {
    entry.refused = true;
    if (!RefusalLines(decision).Admit(std::chrono::steady_clock::now(),
                                      &entry.refusals_not_logged)) {
      return;
    }
  }
  entry.method = sample.method;
  entry.peer = input.peer;
  entry.vm_id = decision.identity.vm_id;
  entry.subscription_id = decision.identity.subscription_id;
  entry.insecure_identity = decision.identity.insecure;
  std::string component = Printable(input.component_name);
  // The host a simulate fleet file needs (docs/ROLLOUTS.md); bounded like the name.
  std::string cluster = Printable(decision.cluster, 255);
  entry.cluster = cluster;
  entry.component = component;
  entry.code = wire::GrpcCodeUpperName(decision.status.code);
  entry.error = decision.status.message;
  entry.identity_failure =
      decision.identity_failure ? IdentityFailureName(*decision.identity_failure) : "";
  entry.generation = decision.generation;
  if (decision.rollout_config) entry.file_sha256 = decision.rollout_config->digest;
  for (size_t i : decision.applied_rollouts) {
    entry.rollouts.push_back(decision.rollout_config->rollouts[i].name);
  }
  entry.served = decision.served_hotfixes;
  std::string base, version, detail, outcome;
  if (input.report) {
    // Caller-supplied: escaped and bounded before they reach the log (the detail was checked
    // only when the call got that far).
    entry.report = true;
    base = Printable(input.report->base_version);
    version = Printable(input.report->hotfix_version);
    detail = Printable(input.report->detail, kMaxReportDetailBytes);
    entry.base_version = base;
    entry.hotfix_version = version;
    if (decision.reported) outcome = contract::OutcomeLabel(*decision.reported);
    entry.outcome = outcome;
    entry.detail = detail;
    entry.duplicate = decision.duplicate;
  }
  entry.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  options_.access_log->WriteFormatted(
      FormatAccessLogLine(level, entry, std::chrono::system_clock::now()));
}

void LivePatchingServiceImpl::Handle(const GrpcCall& call, GrpcReply* reply) {
  if (call.path != contract::kGetComponentConfigPath &&
      call.path != contract::kReportHotfixOutcomePath) {
    reply->code = GrpcCode::kUnimplemented;
    reply->error_message = "unknown method " + Printable(call.path, 128);
    return;
  }
  Clock::time_point start = Clock::now();
  akslivepatching::v1::GetComponentConfigRequest get;
  akslivepatching::v1::ReportHotfixOutcomeRequest report;
  CallInput input;
  if (!ParseRequest(call, &get, &report, &input)) {
    // Not ours to decide on: nothing was authenticated, nothing is logged per call.
    reply->code = GrpcCode::kInvalidArgument;
    reply->error_message = call.path == contract::kGetComponentConfigPath
                               ? "the request is not a GetComponentConfigRequest"
                               : "the request is not a ReportHotfixOutcomeRequest";
    return;
  }
  for (const auto& [key, value] : call.metadata) {
    if (key == "authorization") input.authorization.push_back(value);
  }
  input.authority = call.authority;
  input.peer = call.peer;

  CallDecision decision = Decide(input);
  Report(input, decision, Clock::now() - start);
  reply->code = decision.status.code;
  // A caller whose identity is refused gets this answer and the connection's end: its next
  // try costs it a new TLS handshake, not us another verification on a warm connection.
  reply->close_connection = decision.status.code == GrpcCode::kUnauthenticated ||
                            decision.status.code == GrpcCode::kPermissionDenied;
  reply->caller_at_fault = decision.identity_failure && CallerAtFault(*decision.identity_failure);
  if (!decision.status.ok()) {
    reply->error_message = std::move(decision.status.message);
  } else if (input.report) {
    akslivepatching::v1::ReportHotfixOutcomeResponse().SerializeToString(&reply->message);
  } else {
    akslivepatching::v1::GetComponentConfigResponse response;
    response.set_component_name(get.component_name());
    response.set_config(std::move(decision.config));
    response.SerializeToString(&reply->message);
  }
  reply->delay = options_.testing_response_delay;
}

}  // namespace hotfix::service
