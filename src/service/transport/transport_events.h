// What the service's transport counts and logs about connections and the limits peers run
// into (docs/SERVICE.md, "Limits"). Each event is one label value of
// lp_transport_events_total, so the set is fixed: a peer cannot create series.
#pragma once

#include <string_view>

namespace hotfix::service {

enum class TransportEvent {
  kAccepted,             // a connection was accepted and kept
  kClosed,               // a kept connection closed, for whatever reason
  kShedMaxConnections,   // accepted and closed at once: --max-connections reached
  kShedPerPeer,          // accepted and closed at once: --max-connections-per-peer reached
  kShedRefusedPeer,      // closed after its PROXY header: its address's callers refused lately
  kShedFdExhausted,      // accept failed for lack of file descriptors; one connection shed
  kHandshakeFailed,      // TLS failed (not TLS, no h2 in ALPN, bad ClientHello)
  kHandshakeTimeout,     // TLS not finished within the handshake timeout
  kFirstRequestTimeout,  // handshake done, no request started within the timeout
  kIdleTimeout,          // no stream open for the idle timeout (GOAWAY, then closed)
  kRequestTimeout,       // a request not complete in time (RST_STREAM CANCEL)
  kHeaderListTooLarge,   // a request's headers over the limit (RESOURCE_EXHAUSTED)
  kRequestTooLarge,      // a request body over the limit (RESOURCE_EXHAUSTED)
  kResetFlood,           // streams reset faster than allowed (GOAWAY ENHANCE_YOUR_CALM)
  kControlFrameFlood,    // SETTINGS/PING/WINDOW_UPDATE/PRIORITY/empty frames too fast
  kProtocolError,        // nghttp2 found a protocol error (GOAWAY), CONTINUATION flood incl.
  kOutputStalled,        // the peer stopped reading our output for too long
  kProxyHeaderInvalid,   // --proxy-protocol: the connection did not start with a valid header
  kProxyHeaderTimeout,   // --proxy-protocol: no whole header within the handshake timeout
  kProxyPeerNotAllowed,  // --proxy-protocol: the TCP peer is outside --proxy-protocol-from
  kKeptBytesOverBudget,  // a request refused: its kept bytes do not fit the connection memory
                         // pool or its address's share (connection_memory.h)
  kUnknownServerName,    // --tls-cert-dir: no certificate for the ClientHello's server name
                         // (or, without one, the address it dialed): unrecognized_name alert
  kMemoryOverShare,      // closed: OpenSSL's or nghttp2's holdings for it beyond its baseline
                         // do not fit the pool or its address's share (connection_memory.h)
  kCount,
};

// "accepted", "shed_max_connections", ...: the metric label and log spelling.
const char* TransportEventName(TransportEvent event);

// Where the transport reports its events (the server counts and logs them:
// ops/transport_event_log.h). Called on the event loops' threads.
class TransportEventSink {
 public:
  virtual ~TransportEventSink() = default;
  // detail: what went wrong, when there is more to say than the event (nghttp2's error).
  virtual void OnTransportEvent(TransportEvent event, std::string_view peer,
                                std::string_view detail) = 0;
};

}  // namespace hotfix::service
