// `live-patching-service plan` (docs/ROLLOUTS.md, "Tools"): what one node is served at one
// time and why each rollout reaches it or not, from the file's own rules (ExplainRollout) and
// checked against what the service serves (ComponentConfig::ServedTo).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "service/rollout/rollout.h"
#include "service/store/component_file.h"

namespace hotfix::service {

// The plan for one node at one time, pretty JSON (2-space indent):
//   {"component", "at", "node": {"vm_id", "subscription", "cluster"} (as evaluated: lower-case,
//    port removed), "served": the config the node is served (a JSON value),
//    "rollouts": [{"name", "cohort", "applies", "why" (null, or "halted", the match field that
//    failed, "bucket B not under threshold T (P%)"), "bucket" (null when not computed),
//    "threshold", "percent", "enters_at" (RFC 3339 or null), "state", "hotfixes"}]}
StatusOr<std::string> PlanJson(const ComponentConfig& config, std::string_view component,
                               const RolloutNode& node, RolloutTime at);

}  // namespace hotfix::service
