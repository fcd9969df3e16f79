// akslivepatching.v1.LivePatchingService: who is calling, may they, how often, for what, and
// the answer from the component store (GetComponentConfig), or the count of a node's report
// (ReportHotfixOutcome, docs/ROLLOUTS.md "Automatic halt"). Every refusal is a gRPC code the
// node client's outcome taxonomy reads (docs/CHECK-HOTFIX.md, docs/SERVICE.md):
//
//   missing or invalid identity                        UNAUTHENTICATED     -> noHotfixAvailable
//   verified, but subscription not on the allow-list   PERMISSION_DENIED   -> noHotfixAvailable
//   over the node's request rate                       RESOURCE_EXHAUSTED  -> failed
//   empty or malformed component name (or report)      INVALID_ARGUMENT    -> failed
//   no such component                                  NOT_FOUND           -> noHotfixAvailable
//   store not loaded yet                               UNAVAILABLE         -> customDataFallback
//
// The checks run in that order, so an unauthenticated caller learns nothing about the store.
// Each call writes one JSON access-log line (identity, component, code, duration; never the
// token) and feeds the metrics. The service holds no state of its own: replicas given the same
// store answer the same.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "common/log_budget.h"
#include "contract/live_patching.h"
#include "service/control/auto_halt_controller.h"
#include "service/control/node_evidence.h"
#include "service/control/rollout_status.h"
#include "service/identity/node_identity.h"
#include "service/identity/rate_limiter.h"
#include "service/identity/subscription_allow_list.h"
#include "service/ops/metrics.h"
#include "service/recent_reports.h"
#include "service/rollout/auto_halt.h"
#include "service/store/component_store.h"
#include "service/transport/h2_session.h"
#include "wire/grpc_status.h"

namespace hotfix::service {

struct LivePatchingServiceOptions {
  // Borrowed; each must outlive the service. Only rate_limiter may be null (no limit).
  Authenticator* authenticator = nullptr;
  const ComponentStore* store = nullptr;
  RateLimiter* rate_limiter = nullptr;
  Metrics* metrics = nullptr;
  Logger* access_log = nullptr;
  // Counts the calls each rollout applied to (GET /rollouts, metrics); may be null.
  RolloutStatus* rollout_status = nullptr;
  // Drops repeated reports (ReportHotfixOutcome); null: every report counts.
  RecentReports* recent_reports = nullptr;
  // The nodes that reported, per auto-halting rollout (the halt's evidence); may be null.
  NodeEvidence* node_evidence = nullptr;
  // Subscriptions allowed to call (compared case-insensitively, as GUIDs); null: any caller
  // with a verified identity. Outlives the service.
  const SubscriptionAllowList* allowed_subscriptions = nullptr;
  // Cluster patterns (rollout.h, MatchesClusterPattern) the call's `:authority` host must
  // match; empty: any. `:authority` is what the caller says it dialed, not proven: this keeps
  // a caller to the clusters named, it does not prove which one it belongs to.
  std::vector<std::string> allowed_authorities;
  // A test hook: each answer is sent this long after the decision (on a timer, not a
  // blocked thread), so that tests can have a call in flight. Zero in production.
  std::chrono::milliseconds testing_response_delay{0};
};

// What a ReportHotfixOutcome request carried.
struct OutcomeReport {
  std::string_view base_version;
  std::string_view hotfix_version;
  int outcome = 0;  // akslivepatching.v1.HotfixOutcome, unchecked
  std::string_view detail;
};

// The longest ReportHotfixOutcomeRequest.detail accepted (bytes of printable ASCII).
inline constexpr size_t kMaxReportDetailBytes = 256;
// Refused calls' access-log lines written per second at most for each reason (each identity
// failure, then each gRPC code), the rest counted in the next line of that reason
// (`refusals_not_logged`) and in lp_requests_total whatever happens to the lines. Per reason:
// a peer refused at will for one reason cannot hide the lines of callers refused for another.
inline constexpr uint32_t kRefusalLinesPerSecond = 20;

// What one call carried, transport aside.
struct CallInput {
  std::vector<std::string_view> authorization;  // every `authorization` metadata value
  std::string_view component_name;
  std::string_view authority;  // ":authority": the apiserver host the node dialed (rollouts)
  std::string_view peer;       // for the access log
  // ReportHotfixOutcome's fields; nullopt for GetComponentConfig.
  std::optional<OutcomeReport> report;
};

// The answer to one call and what the access log and metrics say about it.
struct CallDecision {
  wire::GrpcStatus status;  // code and message sent to the node
  std::string config;       // the component's JSON when status is OK
  NodeIdentity identity;
  bool authenticated = false;
  std::optional<IdentityFailure> identity_failure;
  // The component label for metrics: the name when the store knows it, else "unknown".
  std::string metric_component = "unknown";
  uint64_t generation = 0;  // of the store snapshot that answered; 0 when none did
  // The component's config that answered (once the store knew the component), and for a
  // file with rollouts the indexes of the rollouts that applied, in file order (their names
  // are the access log's).
  std::shared_ptr<const ComponentConfig> rollout_config;
  std::vector<size_t> applied_rollouts;
  // For files of the hotfixes shape: the map served (compact JSON), for the access log.
  std::string served_hotfixes;
  // The :authority's host, lower-cased, port removed: the rollouts' cluster, the authority
  // allow-list's and the access log's.
  std::string cluster;
  // ReportHotfixOutcome: the outcome once valid; applied_rollouts then holds the rollouts it
  // is attributed to (they apply to the node now and name that version for that base).
  std::optional<contract::Outcome> reported;
  bool duplicate = false;  // a repeat this replica saw recently: answered, not counted
};

// Serves GetComponentConfig and ReportHotfixOutcome; every other path is UNIMPLEMENTED.
class LivePatchingServiceImpl final : public GrpcHandler {
 public:
  explicit LivePatchingServiceImpl(LivePatchingServiceOptions options);

  // authenticate -> allow-list -> rate limit -> name check -> store lookup, then the answer
  // (GetComponentConfig) or the report checked, attributed and counted. Thread-safe.
  CallDecision Decide(const CallInput& input);

  // Parses the request, decides, writes the access-log line and the metrics, and fills in
  // the reply. Thread-safe.
  void Handle(const GrpcCall& call, GrpcReply* reply) override;

 private:
  // Each step answers OK to go on, or the refusal the node gets; what it learnt about the
  // call (the identity, the component, the rollouts) it writes in `decision` for the access
  // log. `remember`: what Authenticator::Admit takes once the call is let in.
  wire::GrpcStatus Authenticate(const CallInput& input, CallDecision* decision,
                                std::optional<IdentityCacheTicket>* remember);
  // The subscription allow-list, then the authority patterns.
  wire::GrpcStatus Authorize(const std::string& cluster, const NodeIdentity& identity) const;
  wire::GrpcStatus WithinRate(const NodeIdentity& identity);
  // The component's config (then in decision->rollout_config), or a refusal.
  wire::GrpcStatus FindComponent(const CallInput& input, CallDecision* decision) const;
  wire::GrpcStatus Lookup(const CallInput& input, CallDecision* decision) const;
  wire::GrpcStatus CheckReport(const OutcomeReport& report, CallDecision* decision) const;
  void CountReport(const CallInput& input, CallDecision* decision);
  void Report(const CallInput& input, const CallDecision& decision,
              std::chrono::steady_clock::duration elapsed);

  LivePatchingServiceOptions options_;
  // The budget for a refused call's line: its identity failure's, else its gRPC code's.
  LogBudget& RefusalLines(const CallDecision& decision);
  static constexpr size_t kIdentityFailures = 6;  // IdentityFailure's values
  static constexpr size_t kGrpcCodes = 17;        // 0 (OK, unused) to 16
  // One per identity failure, then one per code (a deque: LogBudget does not move).
  std::deque<LogBudget> refusal_lines_;
};

}  // namespace hotfix::service
