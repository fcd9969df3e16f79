// Guest-agent telemetry events: one JSON file per event in the CustomScript extension's
// events folder, in the exact format of AgentBaker's aks-node-controller/helpers/guestagent.go.
#pragma once

#include <chrono>
#include <string>

#include "common/log.h"
#include "common/status.h"

namespace hotfix::node {

struct GuestAgentEvent {
  std::string task;  // "CheckHotfix" -> TaskName "AKS.AKSNodeController.CheckHotfix"
  bool error = false;
  std::string message;  // the timing suffix is appended
  std::chrono::system_clock::time_point start;
  std::chrono::system_clock::time_point end;
};

// {"Timestamp","OperationId","Version":"1.23","TaskName","EventLevel","Message",
//  "EventPid":"0","EventTid":"0"}, compact, no trailing newline, local time.
std::string FormatGuestAgentEvent(const GuestAgentEvent& event);

// Writes "<dir>/<unix nanoseconds>.json" (0644), creating dir (0755) when needed. The file
// is written atomically, so a reader never sees half an event.
Status WriteGuestAgentEvent(const std::string& dir, const GuestAgentEvent& event);

// The one event of a command run that began at `start` and ends now. Telemetry never fails a
// run: a write error is only logged, as ERROR "failed to write guest agent event".
void ReportRunEvent(const std::string& dir, const std::string& task, bool error,
                    const std::string& message, std::chrono::system_clock::time_point start,
                    Logger& log);

}  // namespace hotfix::node
