#include "service/ops/metrics_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <utility>

#include "common/host_port.h"

namespace hotfix::service {
namespace {

constexpr char kMetricsType[] = "text/plain; version=0.0.4; charset=utf-8";

// "ADDR:PORT" (an IPv6 ADDR in brackets; an empty ADDR: every IPv4 address) as a socket
// address, or nullopt.
std::optional<sockaddr_storage> ListenAddress(const std::string& listen) {
  std::optional<HostPort> hp = SplitHostPort(listen);
  if (!hp) return std::nullopt;
  // Port 0 (pick one) too, which ParsePort, for ports to dial, refuses.
  std::optional<uint16_t> port =
      hp->port.find_first_not_of('0') == std::string_view::npos && !hp->port.empty()
          ? std::optional<uint16_t>(0)
          : ParsePort(hp->port);
  if (!port) return std::nullopt;
  sockaddr_storage out{};
  auto* in = reinterpret_cast<sockaddr_in*>(&out);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
  const std::string host = hp->host.empty() ? std::string("0.0.0.0") : std::string(hp->host);
  if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(*port);
  } else if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(*port);
  } else {
    return std::nullopt;
  }
  return out;
}

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
  std::optional<sockaddr_storage> address = ListenAddress(listen);
  if (!address) {
    return Status::InvalidArgument("--metrics-listen " + listen + ": want ADDR:PORT");
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->metrics_text_ = std::move(metrics_text);
  server->rollouts_ = rollouts;
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD;
  if (address->ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  server->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &OnRequest, server.get(),  //
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&*address), MHD_OPTION_CONNECTION_LIMIT,
      kMetricsMaxConnections, MHD_OPTION_PER_IP_CONNECTION_LIMIT, kMetricsMaxConnectionsPerAddress,
      MHD_OPTION_CONNECTION_TIMEOUT, kMetricsIdleTimeoutSeconds, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      kMetricsRequestBytes, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return Status::Unavailable("cannot serve metrics on " + listen +
                               ": cannot listen there (in use, or not this host's address)");
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info != nullptr ? info->port : 0;
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace hotfix::service
