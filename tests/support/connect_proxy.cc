#include "connect_proxy.h"

#include <sys/socket.h>
#include <unistd.h>

#include "socket_util.h"

namespace hotfix::testsupport {
namespace {

void Send(int fd, const std::string& data) { net::SendAll(fd, data.data(), data.size()); }

void DrainUntilClosed(int fd) {
  char buf[1024];
  while (recv(fd, buf, sizeof(buf), 0) > 0) {
  }
}

}  // namespace

ConnectProxy::ConnectProxy(ConnectProxyMode mode, uint16_t upstream_port)
    : mode_(mode), upstream_port_(upstream_port) {
  server_ = std::make_unique<net::ConnectionServer>("127.0.0.1", 0,
                                                    [this](int fd) { HandleConnection(fd); });
}

ConnectProxy::~ConnectProxy() { server_->Stop(); }

uint16_t ConnectProxy::port() const { return server_->port(); }

std::vector<std::string> ConnectProxy::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void ConnectProxy::HandleConnection(int fd) {
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) head.push_back(c);
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(head);
  }
  switch (mode_) {
    case ConnectProxyMode::kTunnel: {
      int upstream = net::ConnectTcp("127.0.0.1", upstream_port_);
      if (upstream < 0) return;
      Send(fd, "HTTP/1.1 200 Connection established\r\n\r\n");
      net::Relay(fd, upstream, server_->stopping());
      close(upstream);
      return;
    }
    case ConnectProxyMode::kForbidden:
      Send(fd, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
      return;
    case ConnectProxyMode::kHugeHeader:
      Send(fd, "HTTP/1.1 200 OK\r\nX-Pad: " + std::string(20000, 'a'));
      return DrainUntilClosed(fd);
    case ConnectProxyMode::kSilent:
      return DrainUntilClosed(fd);
  }
}

}  // namespace hotfix::testsupport
