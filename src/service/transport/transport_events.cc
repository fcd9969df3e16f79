#include "service/transport/transport_events.h"

namespace hotfix::service {

const char* TransportEventName(TransportEvent event) {
  switch (event) {
    case TransportEvent::kAccepted:
      return "accepted";
    case TransportEvent::kClosed:
      return "closed";
    case TransportEvent::kShedMaxConnections:
      return "shed_max_connections";
    case TransportEvent::kShedPerPeer:
      return "shed_per_peer";
    case TransportEvent::kShedRefusedPeer:
      return "shed_refused_peer";
    case TransportEvent::kShedFdExhausted:
      return "shed_fd_exhausted";
    case TransportEvent::kHandshakeFailed:
      return "handshake_failed";
    case TransportEvent::kHandshakeTimeout:
      return "handshake_timeout";
    case TransportEvent::kFirstRequestTimeout:
      return "first_request_timeout";
    case TransportEvent::kIdleTimeout:
      return "idle_timeout";
    case TransportEvent::kRequestTimeout:
      return "request_timeout";
    case TransportEvent::kHeaderListTooLarge:
      return "header_list_too_large";
    case TransportEvent::kRequestTooLarge:
      return "request_too_large";
    case TransportEvent::kResetFlood:
      return "reset_flood";
    case TransportEvent::kControlFrameFlood:
      return "control_frame_flood";
    case TransportEvent::kProtocolError:
      return "protocol_error";
    case TransportEvent::kOutputStalled:
      return "output_stalled";
    case TransportEvent::kProxyHeaderInvalid:
      return "proxy_header_invalid";
    case TransportEvent::kProxyHeaderTimeout:
      return "proxy_header_timeout";
    case TransportEvent::kKeptBytesOverBudget:
      return "kept_bytes_over_budget";
    case TransportEvent::kCount:
      break;
  }
  return "unknown";
}

}  // namespace hotfix::service
