// libprotobuf's own log lines as lines of our JSON log. A request whose string field is not
// UTF-8 makes libprotobuf complain once per call, and its default handler writes
// "[libprotobuf ERROR ...]" to stderr: the one non-JSON line the log would have. They describe
// the peer's bytes, not a fault of ours, so they are warnings at most.
//
// libprotobuf's handler is process-wide: while any ProtobufLogToJson is alive, the newest
// one's logger gets the messages; when the last one goes, they are dropped.
#pragma once

#include "common/log.h"

namespace hotfix::service {

class ProtobufLogToJson {
 public:
  explicit ProtobufLogToJson(Logger* log);  // borrowed; must outlive this
  ~ProtobufLogToJson();
  ProtobufLogToJson(const ProtobufLogToJson&) = delete;
  ProtobufLogToJson& operator=(const ProtobufLogToJson&) = delete;
};

}  // namespace hotfix::service
