#include "common/log.h"

#include <cctype>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

namespace hotfix {

StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    std::string name = LogLevelName(level);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == name) return level;
  }
  return Status::InvalidArgument("log level \"" + std::string(text) +
                                 "\": want debug, info, warn or error");
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

namespace {

// RFC 3339 with nanoseconds and a numeric offset, as slog writes it.
std::string NowRfc3339() {
  auto now = std::chrono::system_clock::now();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(ns / 1000000000);
  long frac = static_cast<long>(ns % 1000000000);
  struct tm tm {};
  localtime_r(&secs, &tm);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  char zone[8];
  strftime(zone, sizeof zone, "%z", &tm);  // +hhmm
  std::string z(zone);
  std::string offset = (z == "+0000") ? "Z" : z.substr(0, 3) + ":" + z.substr(3, 2);
  char out[64];
  snprintf(out, sizeof out, "%s.%09ld%s", date, frac, offset.c_str());
  return out;
}

void WriteAll(int fd, std::string_view s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // Logging never fails the caller.
    off += static_cast<size_t>(n);
  }
}

}  // namespace

Logger::~Logger() {
  if (fd_ >= 0) ::close(fd_);
}

Status Logger::OpenFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("opening log file " + path, errno);
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  return Status::Ok();
}

std::string Logger::FormatLine(LogLevel level, std::string_view msg,
                               const std::vector<LogField>& fields) {
  nlohmann::ordered_json line;
  line["time"] = NowRfc3339();
  line["level"] = LogLevelName(level);
  line["msg"] = std::string(msg);
  for (const auto& f : fields) {
    std::visit([&](const auto& v) { line[f.key] = v; }, f.value);
  }
  // Replace, not throw, on invalid UTF-8 coming from the outside world.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Logger::Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (!Enabled(level)) return;
  std::string line = FormatLine(level, msg, std::vector<LogField>(fields)) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) WriteAll(fd_, line);
  if (to_stderr_) WriteAll(STDERR_FILENO, line);
}

void Logger::WriteFormatted(std::string_view lines) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) WriteAll(fd_, lines);
  if (to_stderr_) WriteAll(STDERR_FILENO, lines);
}

Logger& NullLogger() {
  static Logger* logger = [] {
    auto* l = new Logger();
    l->set_stderr(false);
    return l;
  }();
  return *logger;
}

}  // namespace hotfix
