#include "common/log.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/text.h"

namespace hotfix {

StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  const std::string lower = AsciiLower(text);
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (lower == AsciiLower(LogLevelName(level))) return level;
  }
  return Status::InvalidArgument("log level \"" + std::string(text) +
                                 "\": want debug, info, warn or error");
}

const char* LogLevelName(LogLevel level) {
  constexpr const char* kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};  // in LogLevel's order
  const auto index = static_cast<size_t>(level);
  return index < std::size(kNames) ? kNames[index] : "INFO";
}

namespace {

// "YYYY-MM-DDTHH:MM:SS" and the zone suffix ("Z" or "+hh:mm") of the local time.
// localtime_r takes a process-wide lock and strftime is slow, so each thread redoes them only
// when the second changes.
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

void AppendLogTime(std::string* out, std::chrono::system_clock::time_point now) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const SecondText& text = TextOfSecond(static_cast<time_t>(ns / 1000000000));
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%09ld", static_cast<long>(ns % 1000000000));
  out->append(text.date).append(frac).append(text.zone);
}

void AppendJsonString(std::string* out, std::string_view s) {
  if (std::any_of(s.begin(), s.end(), [](unsigned char c) { return c >= 0x80; })) {
    out->append(nlohmann::json(std::string(s))
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  constexpr std::string_view kEscaped = "\"\\\b\f\n\r\t";  // each as a backslash and kLetters[i]
  constexpr std::string_view kLetters = "\"\\bfnrt";
  out->push_back('"');
  for (unsigned char c : s) {
    if (const size_t i = kEscaped.find(static_cast<char>(c)); i != std::string_view::npos) {
      out->push_back('\\');
      out->push_back(kLetters[i]);
    } else if (c < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", c);
      out->append(u);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

struct Logger::StderrQueue {
  int fd = -1;          // stderr, as a description of our own with O_NONBLOCK (owned)
  bool socket = false;  // stderr itself (not owned), written with MSG_DONTWAIT
  size_t max_bytes = 0;
  std::chrono::milliseconds flush_wait{0};
  std::string pending;  // bytes stderr has not taken yet, in order
  uint64_t dropped_unreported = 0;
  bool stopping = false;
  std::condition_variable wake;
  std::thread flusher;

  // Bytes written now, without waiting: 0 when stderr is full. A reader that went away
  // (EPIPE) or any other error takes the bytes: logging never fails the caller.
  size_t TryWrite(std::string_view s) const {
    for (;;) {
      ssize_t n = socket ? ::send(fd, s.data(), s.size(), MSG_DONTWAIT | MSG_NOSIGNAL)
                         : ::write(fd, s.data(), s.size());
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return s.size();
    }
  }
};

Logger::Logger() = default;

Logger::~Logger() {
  if (stderr_queue_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stderr_queue_->stopping = true;
    }
    stderr_queue_->wake.notify_one();
    stderr_queue_->flusher.join();
    if (!stderr_queue_->socket) ::close(stderr_queue_->fd);
  }
  if (fd_ >= 0) ::close(fd_);
}

Status Logger::NeverBlockOnStderr(size_t max_queued_bytes, std::chrono::milliseconds flush_wait) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stderr_queue_) return Status::Internal("NeverBlockOnStderr called twice");
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return Status::FromErrno("fstat(stderr)", errno);
  if (S_ISREG(st.st_mode)) return Status::Ok();  // a file takes every line at once
  auto queue = std::make_unique<StderrQueue>();
  if (S_ISSOCK(st.st_mode)) {
    queue->fd = STDERR_FILENO;
    queue->socket = true;
  } else {
    // O_NONBLOCK on fd 2 itself would change the description we share with whoever started
    // us (a shell's terminal, a container runtime's pipe); opening /proc/self/fd/2 makes a
    // description of our own on the same pipe or terminal (fs/fifo.c fifo_open for a pipe:
    // ENXIO when it has no reader).
    queue->fd = ::open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (queue->fd < 0) return Status::FromErrno("reopening stderr without blocking", errno);
  }
  queue->max_bytes = max_queued_bytes;
  queue->flush_wait = flush_wait;
  stderr_queue_ = std::move(queue);
  stderr_queue_->flusher = std::thread([this] { RunStderrFlusher(); });
  return Status::Ok();
}

void Logger::EmitToStderrQueueLocked(std::string_view lines) {
  StderrQueue& q = *stderr_queue_;
  if (q.pending.empty()) {
    size_t n = q.TryWrite(lines);
    if (n == lines.size()) return;
    // The rest of a line begun must follow it, whatever the bound: a torn line is worse.
    q.pending.assign(lines.substr(n));
  } else if (q.pending.size() + lines.size() > q.max_bytes) {
    uint64_t n = static_cast<uint64_t>(std::count(lines.begin(), lines.end(), '\n'));
    q.dropped_unreported += n;
    dropped_lines_.fetch_add(n, std::memory_order_relaxed);
    return;
  } else {
    q.pending.append(lines);
  }
  q.wake.notify_one();
}

void Logger::WriteQueueLocked() {
  StderrQueue& q = *stderr_queue_;
  size_t n = q.TryWrite(q.pending);
  q.pending.erase(0, n);
  if (q.pending.empty() && q.dropped_unreported > 0) {
    q.pending = FormatLine(LogLevel::kWarn, "log lines dropped: stderr was not being read",
                           {{"dropped", static_cast<int64_t>(q.dropped_unreported)}}) +
                "\n";
    q.dropped_unreported = 0;
  }
}

void Logger::RunStderrFlusher() {
  StderrQueue& q = *stderr_queue_;
  std::unique_lock<std::mutex> lock(mu_);
  std::chrono::steady_clock::time_point give_up{};
  for (;;) {
    q.wake.wait(lock, [&] { return !q.pending.empty() || q.stopping; });
    if (q.pending.empty()) return;  // stopping, and everything was written
    auto now = std::chrono::steady_clock::now();
    if (q.stopping && give_up == std::chrono::steady_clock::time_point{}) {
      give_up = now + q.flush_wait;
    }
    if (q.stopping && now >= give_up) return;  // its reader never came back
    WriteQueueLocked();
    if (q.pending.empty()) continue;
    lock.unlock();
    // Bounded, so a stop is seen while stderr stays full.
    pollfd p{q.fd, POLLOUT, 0};
    ::poll(&p, 1, 100);
    lock.lock();
  }
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
  std::string time;
  AppendLogTime(&time, std::chrono::system_clock::now());
  line["time"] = std::move(time);
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
  WriteFormatted(FormatLine(level, msg, std::vector<LogField>(fields)) + "\n");
}

void Logger::WriteFormatted(std::string_view lines) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) WriteAll(fd_, lines);
  if (!to_stderr_) return;
  if (stderr_queue_) {
    EmitToStderrQueueLocked(lines);
  } else {
    WriteAll(STDERR_FILENO, lines);
  }
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
