#include "service/rollout/auto_halt.h"

#include <algorithm>
#include <cstdio>

#include "common/openssl.h"

namespace hotfix::service {

bool HaltConditionHolds(const AutoHaltPolicy& policy, const OutcomeTally& tally) {
  if (policy.min_failed_subscriptions &&
      tally.failed_subscriptions < *policy.min_failed_subscriptions) {
    return false;
  }
  if (policy.max_failures && tally.failures >= *policy.max_failures) return true;
  if (tally.reports == 0 || tally.reports < policy.min_reports) return false;
  // failures * 100 / reports > percent, with percent held as percent * 100: 128 bits, since
  // counts reach 2^40 and the factors 10^4.
  using Wide = unsigned __int128;
  return Wide{tally.failures} * 10000 > Wide{policy.max_failure_percent} * tally.reports;
}

std::string PolicyLabel(const AutoHaltPolicy& policy) {
  std::string text =
      "max_failure_percent=" + std::to_string(policy.max_failure_percent) +
      ";min_reports=" + std::to_string(policy.min_reports) +
      ";max_failures=" + (policy.max_failures ? std::to_string(*policy.max_failures) : "") +
      ";min_failed_subscriptions=" +
      (policy.min_failed_subscriptions ? std::to_string(*policy.min_failed_subscriptions) : "");
  return ossl::Sha256Hex(text).substr(0, 12);
}

bool GateHolds(const StepGate& gate, const OutcomeTally& tally) {
  if (tally.reports == 0 || tally.reports < gate.min_nodes) return false;
  if (!gate.max_failure_percent) return true;
  using Wide = unsigned __int128;
  return Wide{tally.failures} * 10000 <= Wide{*gate.max_failure_percent} * tally.reports;
}

std::string GateMissing(const StepGate& gate, const OutcomeTally& tally) {
  if (GateHolds(gate, tally)) return "";
  char buf[160];
  if (tally.reports == 0 || tally.reports < gate.min_nodes) {
    std::snprintf(buf, sizeof buf, "%llu of %llu reporting nodes",
                  static_cast<unsigned long long>(tally.reports),
                  static_cast<unsigned long long>(gate.min_nodes));
    return buf;
  }
  std::snprintf(buf, sizeof buf, "failed nodes %llu of %llu (%.2f%%) > %.2f%%",
                static_cast<unsigned long long>(tally.failures),
                static_cast<unsigned long long>(tally.reports),
                100.0 * static_cast<double>(tally.failures) / tally.reports,
                *gate.max_failure_percent / 100.0);
  return buf;
}

std::string GateLabel(const Rollout& rollout, size_t step) {
  const RolloutStep& s = rollout.steps.at(step);
  std::string text = rollout.name + ";step=" + std::to_string(step) +
                     ";at=" + FormatRolloutTime(s.at) + ";threshold=" + std::to_string(s.threshold);
  if (step > 0) text += ";previous_at=" + FormatRolloutTime(rollout.steps[step - 1].at);
  if (s.gate) {
    text += ";min_nodes=" + std::to_string(s.gate->min_nodes) + ";max_failure_percent=" +
            (s.gate->max_failure_percent ? std::to_string(*s.gate->max_failure_percent) : "") +
            ";bake=" + std::to_string(s.gate->bake.count());
  }
  return ossl::Sha256Hex(text).substr(0, 12);
}

std::string HaltEvidence(const AutoHaltPolicy& policy, const OutcomeTally& tally) {
  char buf[256];
  std::string subscriptions;
  if (policy.min_failed_subscriptions) {
    subscriptions = ", from " + std::to_string(tally.failed_subscriptions) + " subscriptions (" +
                    std::to_string(*policy.min_failed_subscriptions) + " needed)";
  }
  if (policy.max_failures && tally.failures >= *policy.max_failures) {
    std::snprintf(buf, sizeof buf, "failed nodes %llu >= max_failures %llu",
                  static_cast<unsigned long long>(tally.failures),
                  static_cast<unsigned long long>(*policy.max_failures));
    return buf + subscriptions;
  }
  const double share =
      tally.reports == 0 ? 0 : 100.0 * static_cast<double>(tally.failures) / tally.reports;
  std::snprintf(
      buf, sizeof buf, "failed nodes %llu of %llu reporting (%.2f%%) > %.2f%% with %llu or more",
      static_cast<unsigned long long>(tally.failures),
      static_cast<unsigned long long>(tally.reports), share, policy.max_failure_percent / 100.0,
      static_cast<unsigned long long>(policy.min_reports));
  return buf + subscriptions;
}

}  // namespace hotfix::service
