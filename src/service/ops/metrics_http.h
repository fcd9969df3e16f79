// The metrics listener (--metrics-listen): GET /metrics and, when there are rollouts to show,
// GET /rollouts (docs/ROLLOUTS.md, "Status"). Plain HTTP, no authentication (docs/SERVICE.md,
// "--metrics-listen").
//
// GNU libmicrohttpd (Debian's libmicrohttpd12) on one thread of its own with epoll: a
// connection costs a slot, never a thread, so peers that send slowly or not at all cannot
// starve a scrape (civetweb, before it, gave each connection one of 2 threads). Bounded
// (kMetrics* below): connections in all and per client address, the bytes of a request, and
// its time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "service/control/rollout_status.h"

struct MHD_Daemon;

namespace hotfix::service {

// Open connections at most, and from one client address: Prometheus opens one per scrape (a
// pair of replicas, two addresses), so a few slow peers on one address leave the others' scrapes
// their slots.
inline constexpr unsigned kMetricsMaxConnections = 64;
inline constexpr unsigned kMetricsMaxConnectionsPerAddress = 8;
// A connection idle this long (no byte read or written) is closed: a request that never
// arrives whole, a kept-alive connection nobody uses.
inline constexpr unsigned kMetricsIdleTimeoutSeconds = 10;
// The bytes a connection may hold for a request (its line and headers); over it, 431 or 413
// and closed. A scrape's request is a few hundred bytes.
inline constexpr size_t kMetricsRequestBytes = 16 * 1024;

class MetricsHttpServer {
 public:
  // Serves on listen ("ADDR:PORT", exactly that address; port 0 picks one: ListenTcp), or a
  // Status naming --metrics-listen when it cannot. metrics_text: the body of /metrics, called on
  // the listener's thread. rollouts: borrowed, may be null (then no /rollouts); must outlive this.
  static StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, std::function<std::string()> metrics_text,
      const RolloutStatus* rollouts);
  // Stops serving: closes the listener and every connection, joins the thread.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  uint16_t port() const { return port_; }

  // libmicrohttpd's request callback (an MHD_Connection*, its MHD_Result): public only so
  // that the C callback in metrics_http.cc can reach it.
  static int Answer(void* self, void* connection, const char* url, const char* method);

 private:
  MetricsHttpServer() = default;

  std::function<std::string()> metrics_text_;
  const RolloutStatus* rollouts_ = nullptr;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
};

}  // namespace hotfix::service
