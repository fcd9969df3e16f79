// The automatic halt's evidence from Prometheus (docs/ROLLOUTS.md, "Automatic halt"): the
// Prometheus that scrapes every replica sums their lp_rollout_outcomes_total counters, so the
// replicas need no database and no state of their own. Per evaluation, however many rollouts:
//
//   GET /api/v1/query_range  the reports each step added, per (component, rollout, outcome),
//                            summed over replicas:
//       sum by (component, rollout, outcome) (
//           (lp_rollout_outcomes_total - lp_rollout_outcomes_total offset <step>) >= 0
//         or lp_rollout_outcomes_total) > 0
//     Per replica, a step adds the counter's growth, or after a reset (a restart) its new
//     value; a series that appears adds its value. Only steps that added reports are sent.
//     The steps are kept: the first evaluation reads the whole window (in requests of at most
//     10,000 steps), later ones only the steps since the last, re-reading a few before it
//     for scrapes Prometheus had not stored yet.
//   GET /api/v1/query        the same expression at `now` with the offset back to the last
//                            whole step: the reports of the step still in progress.
//   GET /api/v1/query        which rollouts Prometheus has seen served:
//       group by (component, rollout) (lp_rollout_applied_total)
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "service/control/auto_halt_controller.h"

namespace hotfix::service {

struct PrometheusOutcomeOptions {
  std::string url;  // http://HOST:PORT[/prefix]: where Prometheus' /api/v1 is
  // The step (the evaluation interval, in practice). Reports a replica counted within a step
  // of its restart, before Prometheus scraped them, are lost with the process.
  std::chrono::seconds step{30};
  // How far back the evidence reaches at most (Prometheus keeps 15 days by default).
  std::chrono::seconds max_window = std::chrono::hours(24 * 30);
  std::chrono::milliseconds timeout{10000};  // per request
  size_t max_body_bytes = 32u << 20;
};

// Checks the URL now (InvalidArgument); queries nothing until Fetch.
StatusOr<std::unique_ptr<OutcomeSource>> NewPrometheusOutcomeSource(
    PrometheusOutcomeOptions options);

// The step for an interval: the first of 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1 h at
// or above it. Steps divide a minute (or an hour), so a `since` on a whole minute starts one.
std::chrono::seconds PrometheusStep(std::chrono::seconds interval);

// The query_range answer's steps per rollout, as OutcomeSource::Fetch returns them; exposed
// for tests and the fuzzer. step is the query's.
StatusOr<OutcomeEvidence> ParseOutcomeMatrix(std::string_view body, std::chrono::seconds step);
// The instant query's answer as steps (start, end].
StatusOr<OutcomeEvidence> ParseOutcomeVector(std::string_view body, RolloutTime start,
                                             RolloutTime end);
// The `known` set from the instant query's answer.
Status ParseKnownRollouts(std::string_view body, OutcomeEvidence* evidence);

}  // namespace hotfix::service
