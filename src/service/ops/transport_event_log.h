// Transport events (transport/transport_events.h) into the metrics, and into the log at most
// once per kEventLogIntervalSeconds per kind (a flood of refused connections must not become
// a flood of log lines), with how many were not logged since. Thread-safe; lock-free.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "common/log.h"
#include "service/ops/metrics.h"
#include "service/transport/transport_events.h"

namespace hotfix::service {

class TransportEventLog final : public TransportEventSink {
 public:
  static constexpr int64_t kEventLogIntervalSeconds = 10;

  TransportEventLog(Metrics* metrics, Logger* log) : metrics_(metrics), log_(log) {}
  void OnTransportEvent(TransportEvent event, std::string_view peer,
                        std::string_view detail) override;

 private:
  static constexpr size_t kKinds = static_cast<size_t>(TransportEvent::kCount);
  Metrics* metrics_;
  Logger* log_;
  std::array<std::atomic<int64_t>, kKinds> last_logged_{};
  std::array<std::atomic<uint64_t>, kKinds> suppressed_{};
};

}  // namespace hotfix::service
