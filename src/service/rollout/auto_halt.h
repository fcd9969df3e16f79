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

// What the nodes' reports add up to, over every replica, since the rollout's `since`: nodes,
// not reports (docs/ROLLOUTS.md, "Counting nodes"). A node counts once as reporting whatever
// it sent, and once as failed if it reported any failure.
struct OutcomeTally {
  uint64_t reports = 0;               // distinct nodes that reported
  uint64_t failures = 0;              // of those, the ones that reported a failure
  uint64_t failed_subscriptions = 0;  // distinct subscriptions of the failed nodes

  bool operator==(const OutcomeTally&) const = default;
};

// (reports >= min_reports and failures * 100 / reports > max_failure_percent (exactly, in
// integers), or failures >= max_failures), and failed_subscriptions >= min_failed_subscriptions
// when the policy sets it.
bool HaltConditionHolds(const AutoHaltPolicy& policy, const OutcomeTally& tally);

// The policy as a label value: the first 12 hex digits of SHA-256 of its canonical text. A
// halt is recorded under it (lp_rollout_halt_record), so changing any threshold (a person
// acting) judges the evidence afresh, and every replica names the same policy the same way.
std::string PolicyLabel(const AutoHaltPolicy& policy);

// A step's gate on the nodes that reported since the step before it began: reporting >=
// min_nodes and, with max_failure_percent, failed * 100 / reporting <= it (exactly).
bool GateHolds(const StepGate& gate, const OutcomeTally& tally);
// What the gate still misses, for GET /rollouts and plan: "12 of 50 reporting nodes",
// "failed nodes 3 of 40 (7.50%) > 2.00%"; "" when it holds.
std::string GateMissing(const StepGate& gate, const OutcomeTally& tally);
// The gate of rollout.steps[step] as a label value: 12 hex digits of SHA-256 of the rollout's
// name, the step's index, `at`, percent and gate, and the step before's `at`. A gate recorded
// open or started (lp_rollout_gate_open, lp_rollout_step_start) is the same gate only while
// none of those changed.
std::string GateLabel(const Rollout& rollout, size_t step);

// "failures 7 of 20 reports (35%) > 5% after 20 reports" or "failures 3 >= max_failures 3":
// why the condition holds, for the log line of a halt and GET /rollouts.
std::string HaltEvidence(const AutoHaltPolicy& policy, const OutcomeTally& tally);

}  // namespace hotfix::service
