#include "common/duration.h"

#include <algorithm>
#include <cstdint>

#include "common/text.h"

namespace hotfix {
namespace {

struct Unit {
  std::string_view name;
  int64_t ms;
};
// Longest name first, so "ms" is not read as "m" followed by a stray "s".
constexpr Unit kUnits[] = {{"ms", 1}, {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
constexpr int64_t kMaxMs = int64_t{3650} * 86400000;

}  // namespace

StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  const std::string quoted = "duration \"" + std::string(text) + "\"";
  const std::string shape =
      ": want a number and a unit (ms, s, m, h, d), e.g. 250ms, 90s, 30m, 6h, 1d, 1h30m";
  if (text == "0") return std::chrono::milliseconds(0);
  if (text.empty()) return Status::InvalidArgument("empty duration" + shape);
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    int64_t n = 0;
    size_t digits = 0;
    while (i < text.size() && IsAsciiDigit(text[i])) {
      if (++digits > 12) return Status::InvalidArgument(quoted + " is too long");
      n = n * 10 + (text[i++] - '0');
    }
    if (digits == 0 || i == text.size()) return Status::InvalidArgument(quoted + shape);
    const Unit* unit = std::ranges::find_if(
        kUnits, [&](const Unit& u) { return text.substr(i).starts_with(u.name); });
    if (unit == std::end(kUnits)) return Status::InvalidArgument(quoted + shape);
    i += unit->name.size();
    // n < 10^12 and a term past kMaxMs fails below before the next: no int64 overflow.
    if (n > kMaxMs / unit->ms) return Status::InvalidArgument(quoted + " is longer than 3650 days");
    total += n * unit->ms;
    if (total > kMaxMs) return Status::InvalidArgument(quoted + " is longer than 3650 days");
  }
  return std::chrono::milliseconds(total);
}

StatusOr<std::chrono::milliseconds> ParseDurationWithin(std::string_view text,
                                                        std::chrono::milliseconds least,
                                                        std::chrono::milliseconds most) {
  StatusOr<std::chrono::milliseconds> d = ParseDuration(text);
  if (!d.ok()) return d;
  if (*d < least || *d > most) {
    return Status::InvalidArgument("duration \"" + std::string(text) + "\": want " +
                                   FormatDuration(least) + " to " + FormatDuration(most));
  }
  return d;
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t left = d.count();
  if (left <= 0) return "0s";
  std::string out;
  for (const Unit& u : {kUnits[1], kUnits[2], kUnits[3], kUnits[4], kUnits[0]}) {
    if (left >= u.ms) {
      out += std::to_string(left / u.ms) + std::string(u.name);
      left %= u.ms;
    }
  }
  return out;
}

StatusOr<std::chrono::milliseconds> ParseDurationFlag(std::string_view flag, std::string_view text,
                                                      std::chrono::milliseconds least,
                                                      std::chrono::milliseconds most) {
  auto d = ParseDurationWithin(text, least, most);
  if (!d.ok()) return d.status().Annotate(flag);
  return d;
}

Status ApplyOldDurationFlag(std::string_view flag, bool flag_given, std::string_view old_flag,
                            long long old_value, std::string_view unit, std::string* text) {
  if (old_value < 0) return Status::Ok();
  if (flag_given) {
    std::string message = "give ";
    message.append(flag).append(" or ").append(old_flag).append(", not both");
    return Status::InvalidArgument(std::move(message));
  }
  *text = std::to_string(old_value);
  text->append(unit);
  return Status::Ok();
}

}  // namespace hotfix
