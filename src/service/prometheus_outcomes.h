// The automatic halt's evidence from Prometheus (docs/ROLLOUTS.md, "Automatic halt"): the
// Prometheus that scrapes every replica sums their lp_rollout_outcomes_total counters, so the
// replicas need no database and no state of their own. Two requests per evaluation, however
// many rollouts:
//
//   GET /api/v1/query_range  the reports each step added, per (component, rollout, outcome),
//                            summed over replicas, from the earliest `since` to now:
//       sum by (component, rollout, outcome) (
//           (lp_rollout_outcomes_total - lp_rollout_outcomes_total offset <step>) >= 0
//         or lp_rollout_outcomes_total) > 0
//     Per replica, a step adds the counter's growth, or after a reset (a restart) its new
//     value; a series that appears adds its value. Only steps that added reports are sent.
//   GET /api/v1/query        which rollouts Prometheus has seen served:
//       group by (component, rollout) (lp_rollout_applied_total)
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "service/auto_halt_controller.h"

namespace hotfix::service {

struct PrometheusOutcomeOptions {
  std::string url;  // http://HOST:PORT[/prefix]: where Prometheus' /api/v1 is
  // The shortest step (the evaluation interval, in practice); longer when the window would
  // need more than 10,000 steps (Prometheus refuses more than 11,000 points a series).
  std::chrono::seconds min_step{30};
  std::chrono::milliseconds timeout{10000};  // per request
  size_t max_body_bytes = 32u << 20;
};

// Checks the URL now (InvalidArgument); queries nothing until Fetch.
StatusOr<std::unique_ptr<OutcomeSource>> NewPrometheusOutcomeSource(
    PrometheusOutcomeOptions options);

// The step for a window: the first of 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 6,
// 12 h, 1 d at or above both min_step and window / 10000. Steps divide a minute (or an hour,
// or a day), so a `since` on a whole minute starts a step.
std::chrono::seconds PrometheusStep(std::chrono::seconds window, std::chrono::seconds min_step);

// The query_range answer's steps per rollout, as OutcomeSource::Fetch returns them; exposed
// for tests and the fuzzer. step is the query's.
StatusOr<OutcomeEvidence> ParseOutcomeMatrix(std::string_view body, std::chrono::seconds step);
// The `known` set from the instant query's answer.
Status ParseKnownRollouts(std::string_view body, OutcomeEvidence* evidence);

}  // namespace hotfix::service
