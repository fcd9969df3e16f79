#include "service/ops/access_log.h"

namespace hotfix::service {
namespace {

void AppendField(std::string* out, std::string_view key, std::string_view value) {
  out->append(",\"").append(key).append("\":");
  AppendJsonString(out, value);
}

}  // namespace

std::string FormatAccessLogLine(LogLevel level, const AccessLogEntry& e,
                                std::chrono::system_clock::time_point now) {
  std::string out;
  out.reserve(384 + e.error.size());
  out.append("{\"time\":\"");
  AppendLogTime(&out, now);
  out.append("\",\"level\":\"").append(LogLevelName(level)).append("\",\"msg\":");
  AppendJsonString(&out, e.method);
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
    AppendJsonString(&out, e.rollouts[i]);
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

}  // namespace hotfix::service
