// The metrics listener (--metrics-listen): civetweb (Debian's libcivetweb, the HTTP server
// prometheus-cpp's own exposer runs on) answering GET /metrics and, when there are rollouts to
// show, GET /rollouts (docs/ROLLOUTS.md, "Status"). Plain HTTP, no authentication
// (docs/SERVICE.md, "--metrics-listen").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "service/control/rollout_status.h"

class CivetServer;

namespace hotfix::service {

class MetricsHttpServer {
 public:
  // Serves on listen ("ADDR:PORT"; port 0 picks one), or a Status when it cannot be bound
  // (civetweb's C++ API throws; this does not). metrics_text: the body of /metrics, called on
  // civetweb's threads. rollouts: borrowed, may be null (then no /rollouts); must outlive this.
  static StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, std::function<std::string()> metrics_text,
      const RolloutStatus* rollouts);
  // Stops serving; blocks until civetweb's threads are done (up to 2 s).
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  uint16_t port() const;

 private:
  struct Handlers;
  MetricsHttpServer() = default;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<CivetServer> http_;  // after the handlers: stops before they go
};

}  // namespace hotfix::service
