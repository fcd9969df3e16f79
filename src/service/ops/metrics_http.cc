#include "service/ops/metrics_http.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "service/transport/listen_socket.h"

namespace hotfix::service {
namespace {

constexpr char kMetricsType[] = "text/plain; version=0.0.4; charset=utf-8";

MHD_Result Respond(MHD_Connection* connection, unsigned status, const char* type,
                   const std::string& body) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

MHD_Result OnRequest(void* self, MHD_Connection* connection, const char* url, const char* method,
                     const char*, const char*, size_t*, void**) {
  return static_cast<MHD_Result>(MetricsHttpServer::Answer(self, connection, url, method));
}

}  // namespace

// Answered at the first call for the request: a GET carries no body, and anything else is
// refused without reading one.
int MetricsHttpServer::Answer(void* self_ptr, void* connection_ptr, const char* url,
                              const char* method) {
  auto* self = static_cast<MetricsHttpServer*>(self_ptr);
  auto* connection = static_cast<MHD_Connection*>(connection_ptr);
  const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                   std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (std::strcmp(url, "/metrics") == 0) {
    if (!get) return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
    return Respond(connection, MHD_HTTP_OK, kMetricsType, self->metrics_text_());
  }
  if (self->rollouts_ != nullptr && std::strcmp(url, "/rollouts") == 0) {
    if (!get) return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
    return Respond(connection, MHD_HTTP_OK, "application/json",
                   self->rollouts_->Json(RolloutNow()));
  }
  return Respond(connection, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
}

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, std::function<std::string()> metrics_text,
    const RolloutStatus* rollouts) {
  // The listener the gRPC ports use, handed to libmicrohttpd, which closes it when stopped.
  uint16_t port = 0;
  StatusOr<UniqueFd> socket = ListenTcp(listen, "--metrics-listen", &port);
  if (!socket.ok()) return socket.status();
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->metrics_text_ = std::move(metrics_text);
  server->rollouts_ = rollouts;
  server->port_ = port;
  const int fd = socket->release();
  server->daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD, 0, nullptr, nullptr, &OnRequest, server.get(),  //
      MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, kMetricsMaxConnections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, kMetricsMaxConnectionsPerAddress,
      MHD_OPTION_CONNECTION_TIMEOUT, kMetricsIdleTimeoutSeconds, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      kMetricsRequestBytes, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    if (fcntl(fd, F_GETFD) != -1) close(fd);  // not taken over
    return Status::Unavailable("--metrics-listen " + listen + ": libmicrohttpd would not serve it");
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace hotfix::service
