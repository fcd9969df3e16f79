// The operator's tools (docs/ROLLOUTS.md): `live-patching-service validate | plan | simulate |
// rollout`, each a function of its parsed flags. cmd/live-patching-service/main.cc parses the
// flags and calls one of these. Each reads a component folder, never serves, writes its result
// to `out` and its errors to `err` ("live-patching-service <tool>: why"), and returns the
// process's exit status.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace hotfix::service {

inline constexpr int kToolOk = 0;
inline constexpr int kToolFailed = 1;  // a refused file, or a file the tool needs cannot be loaded
inline constexpr int kToolUsage = 2;
inline constexpr char kToolExitCodes[] =
    "Exit status: 0 ok, 1 the check failed (a refused file, or a file the tool needs cannot be "
    "loaded), 2 usage error.";

// validate: one line per refused file of the folder (file, rollout, field and why), then
// "N files ok, M refused". kToolFailed when any file was refused.
struct ValidateToolOptions {
  std::string components_dir;
};
int RunValidateTool(const ValidateToolOptions& options, std::ostream& out, std::ostream& err);

// plan: what one node is served by a component's file at one time, as JSON (control/plan.h).
struct PlanToolOptions {
  std::string components_dir;
  std::string component;
  std::string vm_id;
  std::string subscription;
  std::string cluster;  // the apiserver host the node dials (a :port is removed)
  std::string at;       // RFC 3339 UTC; empty: now
};
int RunPlanTool(const PlanToolOptions& options, std::ostream& out, std::ostream& err);

// simulate: how many nodes of a fleet are served each version at each time, and with
// `against` the nodes whose answer differs between the two folders (control/simulate.h). The
// table goes to `out`; the automatic halt's note and "simulated N nodes at M times" to `err`.
struct SimulateToolOptions {
  std::string components_dir;
  std::string component;
  std::string nodes_file;                // a fleet file (control/fleet.h), or
  std::optional<uint64_t> random_count;  // that many random nodes (exactly one of the two)
  uint64_t seed = 1;
  std::vector<std::string> subscriptions;  // --random's draws; empty: made-up ones
  std::vector<std::string> clusters;
  std::string from, to, every;  // RFC 3339 UTC, RFC 3339 UTC, a rollout duration ("30m")
  std::string against;          // a second folder; empty: none
};
int RunSimulateTool(const SimulateToolOptions& options, std::ostream& out, std::ostream& err);

// rollout: halt, hold or resume one rollout of a component file (control/rollout_edit.h):
// prints the percent before and after and the next step, then the changed lines, and writes
// the file atomically unless dry_run. An edit the service would refuse is refused.
struct RolloutToolOptions {
  std::string action;  // "halt", "hold" or "resume"
  std::string rollout;
  std::string components_dir;
  std::string component = "aksNodeController";
  std::string at;      // RFC 3339 UTC for hold and resume; empty: now
  std::string reason;  // required for halt
  std::string by;      // empty: WhoEdits()
  bool dry_run = false;
};
int RunRolloutTool(const RolloutToolOptions& options, std::ostream& out, std::ostream& err);

// The notes' default `by`: the login and the host ("alice@laptop"; "uid 65532@lps-7f9c" in the
// image, whose user has no name).
std::string WhoEdits();

}  // namespace hotfix::service
