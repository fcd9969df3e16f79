// The automatic halt's evidence as Prometheus' HTTP API answers it (ParseOutcomeMatrix,
// ParseOutcomeVector, ParseKnownRollouts in src/service/ops/prometheus_outcomes.cc), then judged
// (JudgeAutoHalt, HaltConditionHolds in src/service/rollout/auto_halt.cc). Prometheus is the
// operator's, but its answers carry label values any node's report put there and arrive over
// the network.
//
// Input: a byte choosing the policy, then the answer's bytes.
//
// Properties:
// - every parse either fails or gives steps of one query step (or the given window), each
//   with failures <= reports, only for attributed rollouts;
// - the judgement's total is the sum of the steps that start at or after `since`, with
//   failures <= reports;
// - halted_at is set exactly when the condition held after some step, and it held then
//   (checked against a reference written apart, in long double, on the running totals);
// - HaltConditionHolds agrees with the reference on the final totals.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "service/ops/prometheus_outcomes.h"
#include "service/rollout/auto_halt.h"

using namespace hotfix;
using namespace hotfix::service;

namespace {

// failures * 100 / reports > percent, in a wider type than the implementation's.
bool ReferenceHolds(const AutoHaltPolicy& p, uint64_t reports, uint64_t failures) {
  if (p.max_failures && failures >= *p.max_failures) return true;
  if (reports == 0 || reports < p.min_reports) return false;
  const long double share = static_cast<long double>(failures) * 10000.0L;
  const long double limit = static_cast<long double>(p.max_failure_percent) * reports;
  return share > limit;
}

void CheckJudgement(const AutoHaltPolicy& policy, RolloutTime since,
                    const std::vector<TallyStep>& steps) {
  for (const TallyStep& s : steps) FUZZ_CHECK(s.added.failures <= s.added.reports);
  const AutoHaltJudgement j = JudgeAutoHalt(policy, since, steps);
  // The reference: running totals per distinct end, in order.
  std::map<RolloutTime, OutcomeTally> by_end;
  for (const TallyStep& s : steps) {
    if (s.start < since) continue;
    by_end[s.end].reports += s.added.reports;
    by_end[s.end].failures += s.added.failures;
  }
  OutcomeTally total;
  std::optional<RolloutTime> first;
  for (const auto& [end, added] : by_end) {
    total.reports += added.reports;
    total.failures += added.failures;
    if (!first && ReferenceHolds(policy, total.reports, total.failures)) first = end;
  }
  FUZZ_CHECK(j.total == total);
  FUZZ_CHECK(j.halted_at == first);
  FUZZ_CHECK(HaltConditionHolds(policy, total) ==
             ReferenceHolds(policy, total.reports, total.failures));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  AutoHaltPolicy policy;
  policy.max_failure_percent = (data[0] & 0x0f) * 625;  // 0 to 93.75 %
  policy.min_reports = 1 + ((data[0] >> 4) & 0x07);
  if (data[0] & 0x80) policy.max_failures = 3;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const RolloutTime since(std::chrono::seconds(1764806400));  // 2025-12-04T00:00:00Z

  if (auto matrix = ParseOutcomeMatrix(body, std::chrono::seconds(30)); matrix.ok()) {
    for (const auto& [key, steps] : matrix->steps) {
      FUZZ_CHECK(!key.rollout.empty());
      for (const TallyStep& s : steps) FUZZ_CHECK(s.end - s.start == std::chrono::seconds(30));
      // The reference is exact in long double while failures * 10000 stays under 2^64.
      bool small = true;
      for (const TallyStep& s : steps) small = small && s.added.reports < (uint64_t{1} << 36);
      if (small && steps.size() < 4096) CheckJudgement(policy, since, steps);
    }
  }
  const RolloutTime start = since, end = since + std::chrono::seconds(7);
  if (auto vector = ParseOutcomeVector(body, start, end); vector.ok()) {
    for (const auto& [key, steps] : vector->steps) {
      FUZZ_CHECK(!key.rollout.empty());
      for (const TallyStep& s : steps) FUZZ_CHECK(s.start == start && s.end == end);
    }
  }
  OutcomeEvidence known;
  static_cast<void>(ParseKnownRollouts(body, &known));
  return 0;
}
