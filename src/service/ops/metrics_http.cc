#include "service/ops/metrics_http.h"

#include <CivetServer.h>

#include <exception>
#include <string_view>
#include <utility>
#include <vector>

namespace hotfix::service {
namespace {

void Reply(mg_connection* conn, std::string_view content_type, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            static_cast<int>(content_type.size()), content_type.data(), body.size());
  mg_write(conn, body.data(), body.size());
}

// GET /metrics: the text format.
class MetricsHandler final : public CivetHandler {
 public:
  explicit MetricsHandler(std::function<std::string()> text) : text_(std::move(text)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    Reply(conn, "text/plain; version=0.0.4; charset=utf-8", text_());
    return true;
  }

 private:
  std::function<std::string()> text_;
};

// GET /rollouts (docs/ROLLOUTS.md, "Status").
class RolloutsHandler final : public CivetHandler {
 public:
  explicit RolloutsHandler(const RolloutStatus* status) : status_(status) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    Reply(conn, "application/json", status_->Json(RolloutNow()));
    return true;
  }

 private:
  const RolloutStatus* status_;
};

}  // namespace

struct MetricsHttpServer::Handlers {
  std::unique_ptr<MetricsHandler> metrics;
  std::unique_ptr<RolloutsHandler> rollouts;
};

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, std::function<std::string()> metrics_text,
    const RolloutStatus* rollouts) {
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->handlers_ = std::make_unique<Handlers>();
  server->handlers_->metrics = std::make_unique<MetricsHandler>(std::move(metrics_text));
  if (rollouts != nullptr)
    server->handlers_->rollouts = std::make_unique<RolloutsHandler>(rollouts);
  try {
    // As prometheus::Exposer configures civetweb (prometheus-cpp pull/src/exposer.cc).
    server->http_ = std::make_unique<CivetServer>(
        std::vector<std::string>{"listening_ports", listen, "num_threads", "2"});
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot serve metrics on " + listen + ": " + e.what());
  }
  server->http_->addHandler("/metrics", server->handlers_->metrics.get());
  if (rollouts != nullptr)
    server->http_->addHandler("/rollouts", server->handlers_->rollouts.get());
  return server;
}

MetricsHttpServer::~MetricsHttpServer() { http_.reset(); }

uint16_t MetricsHttpServer::port() const {
  std::vector<int> ports = http_->getListeningPorts();
  return ports.empty() ? 0 : static_cast<uint16_t>(ports.front());
}

}  // namespace hotfix::service
