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

// A command line's duration flag, for both binaries: ParseDurationWithin, its error naming the
// flag ("--lps-timeout: ...").
StatusOr<std::chrono::milliseconds> ParseDurationFlag(std::string_view flag, std::string_view text,
                                                      std::chrono::milliseconds least,
                                                      std::chrono::milliseconds most);

// A duration flag's old whole-number name, from before the one style (--lps-timeout-ms=N,
// --shutdown-grace-seconds=N), still accepted. `old_value` is negative when the old name was
// not given; otherwise `*text` becomes N followed by `unit` ("ms", "s"). InvalidArgument
// "give --lps-timeout or --lps-timeout-ms, not both" when both names were given.
Status ApplyOldDurationFlag(std::string_view flag, bool flag_given, std::string_view old_flag,
                            long long old_value, std::string_view unit, std::string* text);

// The shortest form ParseDuration reads back: 5400000 ms -> "1h30m", 250 -> "250ms", 0 -> "0s".
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace hotfix
