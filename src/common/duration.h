// Durations on every command line and in rollout files, in one style: terms of a whole
// number and a unit, largest first or not, e.g. "250ms", "3s", "90s", "30m", "6h", "1d",
// "1h30m". Units: ms, s, m, h, d. "0" alone is zero; otherwise a unit is required.
//
//   StatusOr<std::chrono::milliseconds> d = ParseDuration("1h30m");   // 5,400,000 ms
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix {

// At most 3650 days. InvalidArgument, quoting the text, otherwise.
StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text);

// ParseDuration, then within [least, most]: InvalidArgument naming the range otherwise.
StatusOr<std::chrono::milliseconds> ParseDurationWithin(std::string_view text,
                                                        std::chrono::milliseconds least,
                                                        std::chrono::milliseconds most);

// The shortest form ParseDuration reads back: 5400000 ms -> "1h30m", 250 -> "250ms", 0 -> "0s".
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace hotfix
