// Staged rollouts (docs/ROLLOUTS.md): what a component file's `rollouts` list says, and the
// answer for one node as a pure function of (the file, the node's identity, the time). No
// state: replicas given the same file and the same clock answer the same.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace hotfix::service {

using RolloutClock = std::chrono::system_clock;
using RolloutTime = std::chrono::sys_seconds;

// Size limits on a rollout list (docs/ROLLOUTS.md, "Limits"): a file is refused past them.
inline constexpr size_t kMaxRollouts = 128;
inline constexpr size_t kMaxRolloutSteps = 64;
inline constexpr size_t kMaxMatchEntries = 10000;   // each of subscriptions, vm_ids, ...
inline constexpr size_t kMaxClusterPatterns = 256;  // match.clusters
inline constexpr size_t kMaxClusterPatternChars = 253;
inline constexpr size_t kMaxRolloutHotfixes = 256;  // a rollout's own hotfixes map

// percent * 100: 0 (nobody) to 10000 (everyone).
inline constexpr uint32_t kBucketCount = 10000;

enum class Cohort { kNode, kCluster };

// A step's gate (docs/ROLLOUTS.md, "Advancing on evidence"): the step starts at the later of
// its `at` and the moment the nodes that reported since the step before it began satisfied the
// gate, plus `bake`. Never on the first step.
struct StepGate {
  uint64_t min_nodes = 1;                       // reporting nodes, 1 to 2^40
  std::optional<uint32_t> max_failure_percent;  // failed / reporting, percent * 100
  std::chrono::seconds bake{0};                 // 0 to 30 days
  bool operator==(const StepGate&) const = default;
};

struct RolloutStep {
  RolloutStep() = default;
  RolloutStep(RolloutTime step_at, uint32_t step_threshold,
              std::optional<StepGate> step_gate = std::nullopt)
      : at(step_at), threshold(step_threshold), gate(step_gate) {}

  RolloutTime at;
  uint32_t threshold = 0;  // percent * 100
  std::optional<StepGate> gate;
};

// A gated step that has not started is served as if its `at` were this far (year 36,812):
// ThresholdAt never reaches it, nor any step after it.
inline constexpr RolloutTime kGateWaiting{std::chrono::seconds(int64_t{1} << 40)};

// All lists lower-cased; an empty list does not restrict.
struct RolloutMatch {
  std::vector<std::string> subscriptions;          // sorted
  std::vector<std::string> exclude_subscriptions;  // sorted
  std::vector<std::string> clusters;               // patterns, `*` = any run of characters
  std::vector<std::string> vm_ids;                 // sorted
};

// A rollout that halts itself on the nodes' reports (docs/ROLLOUTS.md, "Automatic halt"):
// halted once reporting nodes >= min_reports and failed nodes * 100 / reporting nodes >
// max_failure_percent, or once failed nodes >= max_failures, counting the nodes that reported
// since `since`; with min_failed_subscriptions, only once the failed nodes come from that many
// subscriptions.
struct AutoHaltPolicy {
  uint32_t max_failure_percent = 0;  // percent * 100, as a step's threshold
  uint64_t min_reports = 1;
  std::optional<uint64_t> max_failures;
  std::optional<uint64_t> min_failed_subscriptions;
  std::optional<RolloutTime> since;  // absent: the first step's `at`

  bool operator==(const AutoHaltPolicy&) const = default;
};

// Counts over [1, kMaxAutoHaltCount]: exact in a double (Prometheus' values) and in the
// integer comparisons of the halt condition.
inline constexpr uint64_t kMaxAutoHaltCount = uint64_t{1} << 40;

// Who halted or resumed a rollout, when and why (`halt_note`, `resume_note`): written by
// `live-patching-service rollout halt|resume`, shown in GET /rollouts and the reload's log line.
// A record for people; the service decides nothing by it.
struct RolloutNote {
  RolloutTime at;
  std::string by;      // 0 to kMaxNoteByChars printable ASCII characters
  std::string reason;  // 0 to kMaxNoteReasonChars, no control characters
  bool operator==(const RolloutNote&) const = default;
};
inline constexpr size_t kMaxNoteByChars = 128;
inline constexpr size_t kMaxNoteReasonChars = 1024;

struct Rollout {
  std::string name;
  std::map<std::string, std::string> hotfixes;  // base -> version, overlaid when it applies
  RolloutMatch match;
  Cohort cohort = Cohort::kNode;
  std::vector<RolloutStep> steps;  // non-empty, `at` strictly increasing
  std::optional<RolloutTime> hold_at;
  bool halted = false;
  std::optional<RolloutNote> halt_note;    // only beside halted: true
  std::optional<RolloutNote> resume_note;  // the last resume
  std::optional<AutoHaltPolicy> auto_halt;
};

// What places a node's report in a rollout's evidence (docs/ROLLOUTS.md, "What a caller can
// move"). A report counts toward each rollout that applies to the node, and a rollout applies
// by the signed document's vmId and subscriptionId, and by the cluster host, which is the
// caller's own :authority.
enum class EvidenceAttribution {
  kSigned,        // no `clusters` and the node cohort: signed facts alone
  kSubscription,  // `clusters` or the cluster cohort, but only the subscriptions it names
  kAuthority,     // `clusters` or the cluster cohort and no subscription: any admitted caller
};
EvidenceAttribution EvidenceAttributionOf(const Rollout& rollout);
const char* EvidenceAttributionName(EvidenceAttribution a);  // "signed", "subscription", ...
// One sentence for GET /rollouts: what a caller can do to this rollout's counts.
const char* EvidenceAttributionNote(EvidenceAttribution a);

// Where an auto-halting rollout's count of reports starts: auto_halt.since, else the first
// step's `at`.
RolloutTime AutoHaltSince(const Rollout& rollout);

// Parses and validates a `rollouts` array. Errors name the rollout and the field:
// `rollouts[2] "anc-1": steps[1].at: ...`. Unknown keys are refused everywhere.
StatusOr<std::vector<Rollout>> ParseRollouts(const nlohmann::json& rollouts);

// "YYYYMM.DD" (a hotfixes key) and "YYYYMM.DD.PATCH" (a value).
bool IsHotfixBase(std::string_view s);
bool IsHotfixVersion(std::string_view s);

// Validates one hotfixes map ({"YYYYMM.DD": "YYYYMM.DD.PATCH"}); `where` prefixes errors.
StatusOr<std::map<std::string, std::string>> ParseHotfixMap(const nlohmann::json& hotfixes,
                                                            std::string_view where);

// "2026-12-04T06:00:00Z" (RFC 3339, UTC, whole seconds) and back. Anything else is
// InvalidArgument `"TEXT" is not RFC 3339 in UTC ("2026-12-04T06:00:00Z")`.
StatusOr<RolloutTime> ParseRolloutTime(std::string_view text);
std::string FormatRolloutTime(RolloutTime t);

// A duration (common/duration.h: "90s", "30m", "6h", "1d", "1h30m") of whole seconds,
// positive, at most 3650 days: a rollout's steps and the operators' tools' steps.
StatusOr<std::chrono::seconds> ParseRolloutDuration(std::string_view text);

// uint64 big-endian of the first 8 bytes of SHA-256(name + ":" + key), mod 10000. The key is
// the lower-cased vmId (node cohort) or apiserver host (cluster cohort).
uint32_t RolloutBucket(std::string_view name, std::string_view key);

// The threshold at time t: that of the last step whose `at` <= min(t, hold_at); 0 before the
// first step and when halted.
uint32_t ThresholdAt(const Rollout& rollout, RolloutTime t);

// Who is asking, as the service knows it.
struct RolloutNode {
  std::string vm_id;         // verified; empty when there is none (--insecure-accept-any-token)
  std::string subscription;  // verified; empty when there is none
  std::string cluster;       // the apiserver host the node dialed (`:authority`, port removed)
};

// A cluster pattern (match.clusters, --allowed-authorities) against a host as
// MakeRolloutNode makes it: the whole host; `*` matches any run of characters, dots and the
// empty run included; no other wildcard. Both lower case.
bool MatchesClusterPattern(std::string_view pattern, std::string_view host);

// Lower-cases the three and strips a port (and IPv6 brackets) from the cluster.
RolloutNode MakeRolloutNode(std::string_view vm_id, std::string_view subscription,
                            std::string_view authority);

enum class RolloutVerdict {
  kApplies,
  kHalted,
  kSubscriptionNotListed,
  kSubscriptionExcluded,
  kClusterNotMatched,
  kVmIdNotListed,
  kNoCohortKey,  // node cohort, but the node has no verified vmId
  kNotUnderThreshold,
};
const char* RolloutVerdictName(RolloutVerdict verdict);

struct RolloutOutcome {
  RolloutVerdict verdict = RolloutVerdict::kApplies;
  uint32_t bucket = 0;     // meaningful when the match passed and the cohort key exists
  uint32_t threshold = 0;  // at the evaluation time
  // The first step time at which this node is (or would be) in; nullopt if never under the
  // file as it stands (halted, not matched, held below its bucket, or every step too small).
  std::optional<RolloutTime> enters_at;
};

// The answer for one node: the overlay of every applying rollout on `base`, in order.
struct RolloutAnswer {
  std::map<std::string, std::string> hotfixes;
  std::vector<size_t> applied;  // indexes into the rollout list
};

// The service's path: only what the answer needs (bucket hashes only for rollouts whose match
// passed and whose threshold is strictly between 0 and 10000).
RolloutAnswer AnswerFor(const std::map<std::string, std::string>& base,
                        const std::vector<Rollout>& rollouts, const RolloutNode& node,
                        RolloutTime now);

// The operator's path (`plan`): every rollout's verdict, bucket and enters_at.
RolloutOutcome ExplainRollout(const Rollout& rollout, const RolloutNode& node, RolloutTime now);

// {"hotfixes":{...}}, compact, keys sorted: what a node with rollouts is served.
std::string ServedHotfixesJson(const std::map<std::string, std::string>& hotfixes);

// What an operator's status page shows (GET /rollouts).
enum class RolloutState { kScheduled, kRamping, kComplete, kHeld, kHalted, kAutoHalted };
const char* RolloutStateName(RolloutState state);
RolloutState StateAt(const Rollout& rollout, RolloutTime now);
// The next step after now that will change the threshold (none when held, halted or done).
std::optional<RolloutStep> NextStep(const Rollout& rollout, RolloutTime now);

}  // namespace hotfix::service
