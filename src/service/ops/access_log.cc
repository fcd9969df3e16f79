#include "service/ops/access_log.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace hotfix::service {
namespace {

// "YYYY-MM-DDTHH:MM:SS" and the zone suffix ("Z" or "+hh:mm") of the local time, as
// Logger::FormatLine writes them. localtime_r takes a process-wide lock and strftime is slow,
// so each thread redoes them only when the second changes.
struct SecondText {
  time_t second = -1;
  char date[32] = {};
  char zone[8] = {};
};

const SecondText& TextOfSecond(time_t second) {
  thread_local SecondText cached;
  if (cached.second != second) {
    struct tm tm {};
    localtime_r(&second, &tm);
    strftime(cached.date, sizeof cached.date, "%Y-%m-%dT%H:%M:%S", &tm);
    char z[8];
    strftime(z, sizeof z, "%z", &tm);  // +hhmm
    if (std::string_view(z) == "+0000") {
      std::snprintf(cached.zone, sizeof cached.zone, "Z");
    } else {
      std::snprintf(cached.zone, sizeof cached.zone, "%.3s:%.2s", z, z + 3);
    }
    cached.second = second;
  }
  return cached;
}

void AppendTime(std::string* out, std::chrono::system_clock::time_point now) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const SecondText& text = TextOfSecond(static_cast<time_t>(ns / 1000000000));
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%09ld", static_cast<long>(ns % 1000000000));
  out->append(text.date).append(frac).append(text.zone);
}

// A JSON string as nlohmann::json::dump(-1, ' ', false, replace) writes it. ASCII is escaped
// here; anything with a byte over 0x7f goes through nlohmann itself, so that invalid UTF-8 is
// replaced exactly as in the Logger's lines (identities and messages are ASCII in practice).
void AppendString(std::string* out, std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) {
      out->append(nlohmann::json(std::string(s))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return;
    }
  }
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", c);
          out->append(u);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void AppendField(std::string* out, std::string_view key, std::string_view value) {
  out->append(",\"").append(key).append("\":");
  AppendString(out, value);
}

}  // namespace

std::string FormatAccessLogLine(LogLevel level, const AccessLogEntry& e,
                                std::chrono::system_clock::time_point now) {
  std::string out;
  out.reserve(384 + e.error.size());
  out.append("{\"time\":\"");
  AppendTime(&out, now);
  out.append("\",\"level\":\"").append(LogLevelName(level)).append("\",\"msg\":");
  AppendString(&out, e.method);
  AppendField(&out, "peer", e.peer);
  AppendField(&out, "vm_id", e.vm_id);
  AppendField(&out, "subscription_id", e.subscription_id);
  out.append(",\"insecure_identity\":").append(e.insecure_identity ? "true" : "false");
  AppendField(&out, "cluster", e.cluster);
  AppendField(&out, "component", e.component);
  AppendField(&out, "code", e.code);
  AppendField(&out, "error", e.error);
  AppendField(&out, "identity_failure", e.identity_failure);
  out.append(",\"generation\":").append(std::to_string(e.generation));
  AppendField(&out, "file_sha256", e.file_sha256);
  out.append(",\"rollouts\":[");
  for (size_t i = 0; i < e.rollouts.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendString(&out, e.rollouts[i]);
  }
  out.push_back(']');
  AppendField(&out, "served", e.served);
  if (e.report) {
    AppendField(&out, "base_version", e.base_version);
    AppendField(&out, "hotfix_version", e.hotfix_version);
    AppendField(&out, "outcome", e.outcome);
    AppendField(&out, "detail", e.detail);
    out.append(",\"duplicate\":").append(e.duplicate ? "true" : "false");
  }
  if (e.refused) {
    out.append(",\"refusals_not_logged\":").append(std::to_string(e.refusals_not_logged));
  }
  out.append(",\"duration_us\":").append(std::to_string(e.duration_us)).append("}\n");
  return out;
}

bool RefusalLogBudget::Admit(std::chrono::steady_clock::time_point now, uint64_t* not_logged) {
  const int64_t second =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  int64_t seen = second_.load(std::memory_order_relaxed);
  // The first caller in a new second opens it; racing callers may each count one line more.
  if (seen != second && second_.compare_exchange_strong(seen, second)) {
    in_second_.store(0, std::memory_order_relaxed);
  }
  if (in_second_.fetch_add(1, std::memory_order_relaxed) >= per_second_) {
    not_logged_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  *not_logged = not_logged_.exchange(0, std::memory_order_relaxed);
  return true;
}

}  // namespace hotfix::service
