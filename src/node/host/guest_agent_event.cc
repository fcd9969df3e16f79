#include "node/host/guest_agent_event.h"

#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "node/go/go_json.h"
#include "node/go/go_utf8.h"

namespace hotfix::node {
namespace {

using std::chrono::milliseconds;

constexpr char kEventVersion[] = "1.23";
constexpr char kTaskPrefix[] = "AKS.AKSNodeController.";
// The guest agent collects "*.json" files; a temp file must not look like one.
constexpr char kEventTempPrefix[] = ".event-";
constexpr mode_t kEventFileMode = 0644;  // read by the Azure monitoring agents
constexpr mode_t kEventFolderMode = 0755;

// Go's layout "2006-01-02 15:04:05.000" in the process's time zone; milliseconds are
// truncated, as Go's fractional-second formatting does.
std::string FormatEventTime(std::chrono::system_clock::time_point t) {
  const int64_t ms = std::chrono::floor<milliseconds>(t.time_since_epoch()).count();
  const int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  const time_t seconds = static_cast<time_t>(secs);
  struct tm local {};
  localtime_r(&seconds, &local);
  char date[40];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &local);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03d", date, static_cast<int>(ms - secs * 1000));
  return out;
}

// "<message> | startTime=… endTime=… durationMs=N", or only the timing part.
std::string FullMessage(const GuestAgentEvent& event) {
  // Truncated toward zero, like Go's Duration.Milliseconds().
  const int64_t duration_ms =
      std::chrono::duration_cast<milliseconds>(event.end - event.start).count();
  std::string timing = "startTime=" + FormatEventTime(event.start) +
                       " endTime=" + FormatEventTime(event.end) +
                       " durationMs=" + std::to_string(duration_ms);
  return event.message.empty() ? timing : event.message + " | " + timing;
}

}  // namespace

std::string FormatGuestAgentEvent(const GuestAgentEvent& event) {
  // Key order and all-string values are the guest agent's format.
  nlohmann::ordered_json doc;
  doc["Timestamp"] = FormatEventTime(event.start);
  doc["OperationId"] = FormatEventTime(event.end);
  doc["Version"] = kEventVersion;
  doc["TaskName"] = ReplaceInvalidUtf8(kTaskPrefix + event.task);
  doc["EventLevel"] = event.error ? "Error" : "Informational";
  doc["Message"] = ReplaceInvalidUtf8(FullMessage(event));
  doc["EventPid"] = "0";
  doc["EventTid"] = "0";
  return EscapeJsonLikeGo(doc.dump());
}

Status WriteGuestAgentEvent(const std::string& dir, const GuestAgentEvent& event) {
  if (Status made = MakeFolders(dir, kEventFolderMode, "events folder"); !made.ok()) return made;
  // Named by the time of writing, not by the event's times, as the reference does.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string path =
      dir + "/" + std::to_string(std::chrono::nanoseconds(now).count()) + ".json";
  AtomicWriteOptions options;
  options.mode = kEventFileMode;
  options.temp_prefix = kEventTempPrefix;
  // Telemetry: whole or absent, never half (the rename), but not worth two flushes of a busy
  // provisioning disk on the boot path.
  options.durable = false;
  return WriteFileAtomically(path, FormatGuestAgentEvent(event), options)
      .Annotate("writing guest agent event " + path);
}

void ReportRunEvent(const std::string& dir, const std::string& task, bool error,
                    const std::string& message, std::chrono::system_clock::time_point start,
                    Logger& log) {
  const GuestAgentEvent event{.task = task,
                              .error = error,
                              .message = message,
                              .start = start,
                              .end = std::chrono::system_clock::now()};
  Status st = WriteGuestAgentEvent(dir, event);
  if (!st.ok()) log.Error("failed to write guest agent event", {{"error", st}});
}

}  // namespace hotfix::node
