// What the rollout tests share: a time from its text, and the example rollout of
// docs/ROLLOUTS.md (1% at 00:00, 10.5% at 06:00, 100% on the 5th; one subscription, east US
// clusters).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "service/rollout/rollout.h"

namespace hotfix::service {

inline RolloutTime T(std::string_view text) {
  StatusOr<RolloutTime> t = ParseRolloutTime(text);
  EXPECT_TRUE(t.ok()) << text;
  return t.ok() ? *t : RolloutTime{};
}

inline nlohmann::json ExampleRollout(const std::string& name = "anc-1") {
  nlohmann::json r = nlohmann::json::parse(R"({
    "hotfixes": {"202604.01": "202604.01.4"},
    "match": {
      "subscriptions": ["8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8"],
      "exclude_subscriptions": [],
      "clusters": ["*.hcp.eastus.azmk8s.io"],
      "vm_ids": []
    },
    "cohort": "node",
    "steps": [
      {"at": "2026-12-04T00:00:00Z", "percent": 1},
      {"at": "2026-12-04T06:00:00Z", "percent": 10.5},
      {"at": "2026-12-05T00:00:00Z", "percent": 100}
    ],
    "hold_at": null,
    "halted": false
  })");
  r["name"] = name;
  return r;
}

// A component file serving 202604.01.3 with the example rollout on top.
inline nlohmann::json ExampleFile(const std::string& name) {
  return {{"hotfixes", {{"202604.01", "202604.01.3"}}}, {"rollouts", {ExampleRollout(name)}}};
}

}  // namespace hotfix::service
