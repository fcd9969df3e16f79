#include "service/transport/transport_events.h"

#include <cstddef>
#include <iterator>

namespace hotfix::service {

const char* TransportEventName(TransportEvent event) {
  // In the enum's order: the index is the event.
  static constexpr const char* kNames[] = {"accepted",
                                           "closed",
                                           "shed_max_connections",
                                           "shed_per_peer",
                                           "shed_refused_peer",
                                           "shed_fd_exhausted",
                                           "handshake_failed",
                                           "handshake_timeout",
                                           "first_request_timeout",
                                           "idle_timeout",
                                           "request_timeout",
                                           "header_list_too_large",
                                           "request_too_large",
                                           "reset_flood",
                                           "control_frame_flood",
                                           "protocol_error",
                                           "output_stalled",
                                           "proxy_header_invalid",
                                           "proxy_header_timeout",
                                           "proxy_peer_not_allowed",
                                           "kept_bytes_over_budget",
                                           "unknown_server_name",
                                           "memory_over_share"};
  static_assert(std::size(kNames) == static_cast<size_t>(TransportEvent::kCount));
  const auto i = static_cast<size_t>(event);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

}  // namespace hotfix::service
