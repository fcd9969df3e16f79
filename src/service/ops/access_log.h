// The access-log line of one call (GetComponentConfig or ReportHotfixOutcome), formatted straight
// into a string: the same JSON, field for field, that Logger::FormatLine makes
// ({"time":...,"level":..., "msg":"GetComponentConfig",...}), without building a JSON DOM and
// calling strftime for every call. Under load the DOM version was most of the service's own CPU
// (docs/history/BENCHMARKS.md, "Where the service's time goes now", of the libgrpc round).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"

namespace hotfix::service {

struct AccessLogEntry {
  std::string_view method = "GetComponentConfig";  // the line's "msg"
  std::string_view peer;
  std::string_view vm_id;
  std::string_view subscription_id;
  bool insecure_identity = false;
  std::string_view cluster;    // the apiserver host from :authority (rollouts' cluster)
  std::string_view component;  // already made printable by the caller
  std::string_view code;
  std::string_view error;
  std::string_view identity_failure;
  uint64_t generation = 0;                 // the store snapshot that answered
  std::string_view file_sha256;            // the component file's digest; "" when none
  std::vector<std::string_view> rollouts;  // the rollouts that applied
  std::string_view served;  // the hotfixes map served (compact JSON), never the token
  int64_t duration_us = 0;
  // ReportHotfixOutcome only: these fields are written when report is set (caller-supplied
  // strings already made printable and bounded by the caller). `rollouts` then holds the
  // rollouts the report was attributed to.
  bool report = false;
  std::string_view base_version;
  std::string_view hotfix_version;
  std::string_view outcome;  // a contract::OutcomeLabel, or "" when the report was refused
  std::string_view detail;
  bool duplicate = false;  // a repeat this replica saw recently: not counted
  // On refused calls' (WARN) lines: how many refusals were not logged since the last such
  // line (common/log_budget.h); absent from OK calls' lines.
  bool refused = false;
  uint64_t refusals_not_logged = 0;
};

// One line, ending in '\n'. Strings are escaped as nlohmann::json escapes them (invalid
// UTF-8 replaced), so a log reader sees no difference from the Logger's own lines.
std::string FormatAccessLogLine(LogLevel level, const AccessLogEntry& entry,
                                std::chrono::system_clock::time_point now);

}  // namespace hotfix::service
