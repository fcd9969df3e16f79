#include "service/protobuf_log.h"

#include <google/protobuf/stubs/logging.h>

#include <atomic>
#include <string>

namespace hotfix::service {
namespace {

std::atomic<Logger*> g_log{nullptr};
std::atomic<int> g_log_users{0};  // ProtobufLogToJson objects alive

void Handle(google::protobuf::LogLevel level, const char* file, int line,
            const std::string& message) {
  Logger* log = g_log.load();
  if (log == nullptr) return;
  log->Log(level == google::protobuf::LOGLEVEL_INFO ? LogLevel::kInfo : LogLevel::kWarn, "protobuf",
           {{"message", message}, {"source", std::string(file) + ":" + std::to_string(line)}});
}

}  // namespace

ProtobufLogToJson::ProtobufLogToJson(Logger* log) {
  g_log = log;
  g_log_users.fetch_add(1);
  google::protobuf::SetLogHandler(Handle);
}

ProtobufLogToJson::~ProtobufLogToJson() {
  if (g_log_users.fetch_sub(1) == 1) g_log = nullptr;
}

}  // namespace hotfix::service
