#include "service/transport/listen_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace hotfix::service {

StatusOr<UniqueFd> ListenTcp(const std::string& address, const std::string& flag, uint16_t* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return Status::InvalidArgument(flag + " " + address + ": want ADDR:PORT");
  }
  std::string host = address.substr(0, colon);
  std::string service = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rv = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rv != 0) return Status::InvalidArgument(flag + " " + address + ": " + gai_strerror(rv));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, freeaddrinfo);
  UniqueFd fd(socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Status::FromErrno(flag + " " + address + ": socket", errno);
  int one = 1;
  // SO_REUSEADDR only (restart while old connections are in TIME_WAIT); never SO_REUSEPORT.
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // Every connection accepted from it starts with TCP_NODELAY (Linux copies the listener's
  // TCP options into each accepted socket; service_listen_socket_test holds it to that): an
  // answer's frames leave at once, and a node's connection costs no setsockopt of its own.
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0 || listen(fd.get(), 4096) != 0) {
    return Status::Unavailable(flag + " " + address + ": cannot listen there (" +
                               std::strerror(errno) + ")");
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  *port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

}  // namespace hotfix::service
