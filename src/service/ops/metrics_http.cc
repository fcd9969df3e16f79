#include "service/ops/metrics_http.h"

#include <CivetServer.h>

#include <exception>
#include <utility>
#include <vector>

namespace hotfix::service {
namespace {

// GET /metrics and GET /rollouts: a body made at each request.
class BodyHandler final : public CivetHandler {
 public:
  BodyHandler(const char* content_type, std::function<std::string()> body)
      : content_type_(content_type), body_(std::move(body)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    const std::string body = body_();
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              content_type_, body.size());
    mg_write(conn, body.data(), body.size());
    return true;
  }

 private:
  const char* content_type_;
  std::function<std::string()> body_;
};

}  // namespace

struct MetricsHttpServer::Handlers {
  std::unique_ptr<BodyHandler> metrics;
  std::unique_ptr<BodyHandler> rollouts;
};

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, std::function<std::string()> metrics_text,
    const RolloutStatus* rollouts) {
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->handlers_ = std::make_unique<Handlers>();
  server->handlers_->metrics = std::make_unique<BodyHandler>(
      "text/plain; version=0.0.4; charset=utf-8", std::move(metrics_text));
  if (rollouts != nullptr) {
    server->handlers_->rollouts = std::make_unique<BodyHandler>(
        "application/json", [rollouts] { return rollouts->Json(RolloutNow()); });
  }
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
