// The events' names are label values of lp_transport_events_total: the shipped alert rules and
// dashboard (deploy/) and operators' queries use them, so each is asserted here, in the enum's
// order (TransportEventName is a table indexed by the event).
#include "service/transport/transport_events.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hotfix::service {
namespace {

TEST(TransportEventNameTest, EveryEventHasItsLabel) {
  const std::vector<std::string> expected = {
      "accepted",
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
      "memory_over_share",
  };
  ASSERT_EQ(expected.size(), static_cast<size_t>(TransportEvent::kCount));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(TransportEventName(static_cast<TransportEvent>(i)), expected[i]) << "event " << i;
  }
}

}  // namespace
}  // namespace hotfix::service
