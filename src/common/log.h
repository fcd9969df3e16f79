// JSON log lines in the shape of Go's slog JSON handler, which the reference writes and
// operators grep: {"time":"...","level":"INFO","msg":"...","key":value,...}. Each line goes
// to the log file (append, 0644) and to stderr, written before Log() returns.
//
// The service's event loops log, and a reader of stderr that stops reading (a full pipe to a
// stalled log shipper, a terminal on Ctrl-S) must not stall them: after NeverBlockOnStderr()
// a line stderr cannot take now is queued, in order, and written by a thread of the logger's
// own once stderr can take it; past the queue's bound lines are dropped, counted, and said.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace hotfix {

struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(std::string(v)) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string(v)) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, int64_t v) : key(k), value(v) {}
  LogField(std::string_view k, int v) : key(k), value(int64_t{v}) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}
  LogField(std::string_view k, const Status& s) : key(k), value(s.ToString()) {}
  std::string key;
  std::variant<std::string, int64_t, bool> value;
};

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// "DEBUG", "INFO", "WARN", "ERROR": the `level` of every JSON line.
const char* LogLevelName(LogLevel level);
// "debug", "info", "warn", "error" (any case): --log-level. InvalidArgument otherwise.
StatusOr<LogLevel> ParseLogLevel(std::string_view text);

// The line's "time" as slog writes it, RFC 3339 in local time with nanoseconds and a numeric
// offset ("2026-12-04T21:43:02.123456789Z", "...+01:00"), appended to out. The date and zone
// are made once a second per thread.
void AppendLogTime(std::string* out, std::chrono::system_clock::time_point now);
// A JSON string, quotes included, exactly as nlohmann::json::dump(-1, ' ', false, replace)
// writes it (the lines' encoder): ASCII escaped here, anything with a byte over 0x7f through
// nlohmann itself, so invalid UTF-8 is replaced alike. For lines formatted without a DOM.
void AppendJsonString(std::string* out, std::string_view s);

class Logger {
 public:
  // Writes only to stderr until OpenFile() succeeds.
  Logger();
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  // Opens (creating with 0644, appending) the log file; lines then go to both sinks.
  Status OpenFile(const std::string& path);
  void set_stderr(bool on) { to_stderr_ = on; }
  // From now on writing to stderr never waits when stderr is a pipe, a FIFO, a terminal or a
  // socket (a regular file takes every line at once: it is written as before). What stderr
  // cannot take now waits in a queue of at most `max_queued_bytes`, written in order by a
  // thread that also writes, once the queue has emptied, a WARN line with the count of lines
  // that did not fit (dropped_lines()). The destructor gives the queue up to `flush_wait`.
  // Fails (and changes nothing) when stderr cannot be reopened without blocking (no /proc,
  // or a pipe with no reader). Once only; set_stderr(false) makes it moot.
  Status NeverBlockOnStderr(size_t max_queued_bytes = kDefaultMaxQueuedBytes,
                            std::chrono::milliseconds flush_wait = std::chrono::seconds(2));
  static constexpr size_t kDefaultMaxQueuedBytes = 1 << 20;
  // Lines stderr never got because its queue was full (lp_log_lines_dropped_total).
  uint64_t dropped_lines() const { return dropped_lines_.load(std::memory_order_relaxed); }
  // Lines below `level` are dropped (--log-level); INFO by default.
  void set_min_level(LogLevel level) { min_level_.store(level, std::memory_order_relaxed); }
  bool Enabled(LogLevel level) const { return level >= min_level_.load(std::memory_order_relaxed); }

  void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});
  void Info(std::string_view msg, std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kInfo, msg, fields);
  }
  void Warn(std::string_view msg, std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kWarn, msg, fields);
  }
  void Error(std::string_view msg, std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kError, msg, fields);
  }

  // Lines formatted elsewhere in FormatLine's shape, each ending in '\n', written as they are
  // to the same sinks (the service's per-call access log formats its own, without a DOM).
  // The caller checks Enabled() for their level first.
  void WriteFormatted(std::string_view lines);

  // One JSON line, without the trailing newline; exposed for tests.
  static std::string FormatLine(LogLevel level, std::string_view msg,
                                const std::vector<LogField>& fields);

 private:
  struct StderrQueue;
  // Writes what stderr takes now without waiting and queues the rest. Holds mu_.
  void EmitToStderrQueueLocked(std::string_view lines);
  // Writes the queue's head without waiting; queues the "dropped" line once it emptied.
  void WriteQueueLocked();
  void RunStderrFlusher();

  std::mutex mu_;
  int fd_ = -1;
  bool to_stderr_ = true;
  std::atomic<LogLevel> min_level_{LogLevel::kInfo};
  std::unique_ptr<StderrQueue> stderr_queue_;  // after NeverBlockOnStderr()
  std::atomic<uint64_t> dropped_lines_{0};
};

// A logger that discards everything: for tests and library code with nothing to say.
Logger& NullLogger();

}  // namespace hotfix
