#include "service/control/plan.h"

#include "common/duration.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

namespace hotfix::service {

namespace {

using ordered_json = nlohmann::ordered_json;

// 1050 -> "10.5", 100 -> "1", 5 -> "0.05".
std::string PercentText(uint32_t threshold) {
  std::string text = std::to_string(threshold / 100);
  const uint32_t cents = threshold % 100;
  if (cents != 0) {
    text += '.';
    text += static_cast<char>('0' + cents / 10);
    if (cents % 10 != 0) text += static_cast<char>('0' + cents % 10);
  }
  return text;
}

ordered_json PercentJson(uint32_t threshold) {
  if (threshold % 100 == 0) return threshold / 100;
  return static_cast<double>(threshold) / 100.0;
}

// The `why` of one rollout for one node: empty when it applies.
std::string WhyNot(const RolloutOutcome& outcome) {
  switch (outcome.verdict) {
    case RolloutVerdict::kApplies:
      return "";
    case RolloutVerdict::kNotUnderThreshold:
      return "bucket " + std::to_string(outcome.bucket) + " not under threshold " +
             std::to_string(outcome.threshold) + " (" + PercentText(outcome.threshold) + "%)";
    default:
      return RolloutVerdictName(outcome.verdict);
  }
}

}  // namespace

StatusOr<std::string> PlanJson(const ComponentConfig& config, std::string_view component,
                               const RolloutNode& node, RolloutTime at) {
  std::vector<size_t> applied;
  const std::string served_text = config.ServedTo(node, at, &applied);
  ordered_json served = ordered_json::parse(served_text, nullptr, /*allow_exceptions=*/false);
  if (served.is_discarded()) return Status::Internal("the served config is not JSON");

  ordered_json out = ordered_json::object();
  out["component"] = std::string(component);
  out["at"] = FormatRolloutTime(at);
  out["node"] = {
      {"vm_id", node.vm_id}, {"subscription", node.subscription}, {"cluster", node.cluster}};
  out["served"] = std::move(served);
  ordered_json rollouts = ordered_json::array();
  for (size_t i = 0; i < config.rollouts.size(); ++i) {
    const Rollout& r = config.rollouts[i];
    const RolloutOutcome o = ExplainRollout(r, node, at);
    const bool applies = o.verdict == RolloutVerdict::kApplies;
    const bool in_answer = std::find(applied.begin(), applied.end(), i) != applied.end();
    if (applies != in_answer) {
      // The operator's view must never disagree with what the service serves.
      return Status::Internal("plan and the served answer disagree on rollout " + r.name);
    }
    ordered_json entry = ordered_json::object();
    entry["name"] = r.name;
    entry["cohort"] = r.cohort == Cohort::kNode ? "node" : "cluster";
    entry["applies"] = applies;
    entry["why"] = applies ? ordered_json(nullptr) : ordered_json(WhyNot(o));
    const bool bucketed = applies || o.verdict == RolloutVerdict::kNotUnderThreshold;
    entry["bucket"] = bucketed ? ordered_json(o.bucket) : ordered_json(nullptr);
    entry["threshold"] = o.threshold;
    entry["percent"] = PercentJson(o.threshold);
    entry["enters_at"] =
        o.enters_at ? ordered_json(FormatRolloutTime(*o.enters_at)) : ordered_json(nullptr);
    entry["state"] = RolloutStateName(StateAt(r, at));
    // The plan is the file's answer: a running replica also applies the evidence.
    entry["auto_halt"] = ordered_json(nullptr);
    if (r.auto_halt) {
      entry["auto_halt"] = {
          {"max_failure_percent", PercentJson(r.auto_halt->max_failure_percent)},
          {"min_reports", r.auto_halt->min_reports},
          {"max_failures", r.auto_halt->max_failures ? ordered_json(*r.auto_halt->max_failures)
                                                     : ordered_json(nullptr)},
          {"min_failed_subscriptions", r.auto_halt->min_failed_subscriptions
                                           ? ordered_json(*r.auto_halt->min_failed_subscriptions)
                                           : ordered_json(nullptr)},
          {"since", FormatRolloutTime(AutoHaltSince(r))},
          {"note",
           "applies only while its nodes' reports have not halted it and the service "
           "can read them (GET /rollouts shows the judgement)"}};
    }
    // Gates: the file's; whether a running rollout waits on one is GET /rollouts' to say.
    entry["gates"] = ordered_json::array();
    for (size_t k = 0; k < r.steps.size(); ++k) {
      if (!r.steps[k].gate) continue;
      const StepGate& g = *r.steps[k].gate;
      entry["gates"].push_back(
          {{"step", k},
           {"at", FormatRolloutTime(r.steps[k].at)},
           {"percent", PercentJson(r.steps[k].threshold)},
           {"min_nodes", g.min_nodes},
           {"max_failure_percent",
            g.max_failure_percent ? PercentJson(*g.max_failure_percent) : ordered_json(nullptr)},
           {"bake", FormatDuration(g.bake)},
           {"note",
            "starts no earlier than its at: when the nodes that reported since the step before "
            "it began satisfy the gate for its bake (GET /rollouts shows what is missing)"}});
    }
    if (!entry["gates"].empty() && o.enters_at) {
      entry["enters_at_note"] = "at the earliest: a gated step before it starts on evidence";
    }
    entry["hotfixes"] = ordered_json(r.hotfixes);
    rollouts.push_back(std::move(entry));
  }
  out["rollouts"] = std::move(rollouts);
  return out.dump(2, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace hotfix::service
