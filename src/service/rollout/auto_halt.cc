#include "service/rollout/auto_halt.h"

#include <algorithm>
#include <cstdio>

namespace hotfix::service {

const char* ReportedOutcomeName(ReportedOutcome outcome) {
  switch (outcome) {
    case ReportedOutcome::kInstalled:
      return "installed";
    case ReportedOutcome::kPlatformUnsupported:
      return "platform_unsupported";
    case ReportedOutcome::kInstallFailed:
      return "install_failed";
    case ReportedOutcome::kVersionMismatch:
      return "version_mismatch";
    case ReportedOutcome::kStageFailed:
      return "stage_failed";
    case ReportedOutcome::kFailedOther:
      return "failed_other";
  }
  return "failed_other";
}

std::optional<ReportedOutcome> ReportedOutcomeFromName(std::string_view name) {
  for (ReportedOutcome outcome : kAllReportedOutcomes) {
    if (name == ReportedOutcomeName(outcome)) return outcome;
  }
  return std::nullopt;
}

bool HaltConditionHolds(const AutoHaltPolicy& policy, const OutcomeTally& tally) {
  if (policy.max_failures && tally.failures >= *policy.max_failures) return true;
  if (tally.reports == 0 || tally.reports < policy.min_reports) return false;
  // failures * 100 / reports > percent, with percent held as percent * 100: 128 bits, since
  // counts reach 2^40 and the factors 10^4.
  using Wide = unsigned __int128;
  return Wide{tally.failures} * 10000 > Wide{policy.max_failure_percent} * tally.reports;
}

AutoHaltJudgement JudgeAutoHalt(const AutoHaltPolicy& policy, RolloutTime since,
                                std::vector<TallyStep> steps) {
  std::sort(steps.begin(), steps.end(),
            [](const TallyStep& a, const TallyStep& b) { return a.end < b.end; });
  AutoHaltJudgement judgement;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].start < since) continue;
    judgement.total.reports += steps[i].added.reports;
    judgement.total.failures += steps[i].added.failures;
    const bool last_of_step = i + 1 == steps.size() || steps[i + 1].end != steps[i].end;
    if (last_of_step && !judgement.halted_at && HaltConditionHolds(policy, judgement.total)) {
      judgement.halted_at = steps[i].end;
    }
  }
  return judgement;
}

std::string HaltEvidence(const AutoHaltPolicy& policy, const OutcomeTally& tally) {
  char buf[256];
  if (policy.max_failures && tally.failures >= *policy.max_failures) {
    std::snprintf(buf, sizeof buf, "failures %llu >= max_failures %llu",
                  static_cast<unsigned long long>(tally.failures),
                  static_cast<unsigned long long>(*policy.max_failures));
    return buf;
  }
  const double share =
      tally.reports == 0 ? 0 : 100.0 * static_cast<double>(tally.failures) / tally.reports;
  std::snprintf(
      buf, sizeof buf, "failures %llu of %llu reports (%.2f%%) > %.2f%% with %llu or more",
      static_cast<unsigned long long>(tally.failures),
      static_cast<unsigned long long>(tally.reports), share, policy.max_failure_percent / 100.0,
      static_cast<unsigned long long>(policy.min_reports));
  return buf;
}

}  // namespace hotfix::service
