// The automatic halt's decision (docs/ROLLOUTS.md, "Automatic halt"), as pure functions of a
// rollout's policy and the nodes' reports counted over every replica. No I/O: the evidence
// comes from an OutcomeSource (auto_halt_controller.h), Prometheus in production.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "service/rollout/rollout.h"

namespace hotfix::service {

// The outcomes a node reports (ReportHotfixOutcome), as metric labels: a small fixed set.
// Every one but kInstalled is a failure.
enum class ReportedOutcome {
  kInstalled,
  kPlatformUnsupported,
  kInstallFailed,
  kVersionMismatch,
  kStageFailed,
  kFailedOther,
};
inline constexpr ReportedOutcome kAllReportedOutcomes[] = {
    ReportedOutcome::kInstalled,     ReportedOutcome::kPlatformUnsupported,
    ReportedOutcome::kInstallFailed, ReportedOutcome::kVersionMismatch,
    ReportedOutcome::kStageFailed,   ReportedOutcome::kFailedOther,
};
// "installed", "platform_unsupported", "install_failed", "version_mismatch", "stage_failed",
// "failed_other".
const char* ReportedOutcomeName(ReportedOutcome outcome);
std::optional<ReportedOutcome> ReportedOutcomeFromName(std::string_view name);
inline bool IsFailure(ReportedOutcome outcome) { return outcome != ReportedOutcome::kInstalled; }

struct OutcomeTally {
  uint64_t reports = 0;   // every outcome
  uint64_t failures = 0;  // every outcome but installed

  bool operator==(const OutcomeTally&) const = default;
};

// reports >= min_reports and failures * 100 / reports > max_failure_percent (exactly, in
// integers), or failures >= max_failures.
bool HaltConditionHolds(const AutoHaltPolicy& policy, const OutcomeTally& tally);

// The reports of one rollout that arrived in the step (start, end].
struct TallyStep {
  RolloutTime start;
  RolloutTime end;
  OutcomeTally added;
};

struct AutoHaltJudgement {
  OutcomeTally total;                    // of the steps wholly after `since`
  std::optional<RolloutTime> halted_at;  // the end of the first step after which it held
};

// Adds up the steps that start at or after `since` in time order (they may come in any order,
// and several may share a step: those are added together before the condition is checked)
// and finds the first step after which the condition held. Once it has, later successes do
// not undo it: the halt is sticky. A step that straddles `since` is left out, so moving
// `since` past the failures leaves them out.
AutoHaltJudgement JudgeAutoHalt(const AutoHaltPolicy& policy, RolloutTime since,
                                std::vector<TallyStep> steps);

// "failures 7 of 20 reports (35%) > 5% after 20 reports" or "failures 3 >= max_failures 3":
// why the condition holds, for the log line of a halt and GET /rollouts.
std::string HaltEvidence(const AutoHaltPolicy& policy, const OutcomeTally& tally);

}  // namespace hotfix::service
