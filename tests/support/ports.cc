#include "ports.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/host_port.h"
#include "socket_util.h"

namespace hotfix::testsupport {
namespace {

uint16_t BindEphemeralPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  int err = errno;
  close(fd);
  if (!ok) throw std::runtime_error(std::string("binding 127.0.0.1:0: ") + std::strerror(err));
  return ntohs(addr.sin_port);
}

// Scans one /proc/net/tcp* table for a LISTEN (state 0A) socket on port.
bool TableHasListener(const char* table, uint16_t port) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    size_t colon = local.rfind(':');
    if (colon == std::string::npos || state != "0A") continue;
    if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) return true;
  }
  return false;
}

}  // namespace

uint16_t PickFreePort() {
  static std::mutex mu;
  static std::set<uint16_t> handed_out;
  std::lock_guard<std::mutex> lock(mu);
  for (int attempt = 0; attempt < 100; ++attempt) {
    uint16_t port = BindEphemeralPort();
    if (handed_out.count(port) || IsListening(port)) continue;
    handed_out.insert(port);
    return port;
  }
  throw std::runtime_error("no free loopback port after 100 attempts");
}

std::string NonLoopbackIpv4() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* a = all; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  ::freeifaddrs(all);
  return found;
}

std::string LoopbackAddress(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

ListenAddress ParseListenAddress(std::string_view text) {
  std::optional<HostPort> split = SplitHostPort(text);
  std::optional<uint16_t> port;
  if (split) port = split->port == "0" ? std::optional<uint16_t>(0) : ParsePort(split->port);
  if (!port)
    throw std::runtime_error("--listen wants HOST:PORT, not \"" + std::string(text) + "\"");
  return {std::string(split->host), *port};
}

int ConnectLoopback(uint16_t port) { return net::ConnectTcp("127.0.0.1", port); }

bool IsListening(uint16_t port) {
  return TableHasListener("/proc/net/tcp", port) || TableHasListener("/proc/net/tcp6", port);
}

bool WaitUntilListening(uint16_t port, std::chrono::milliseconds timeout,
                        const std::function<bool()>& still_alive) {
  auto give_up = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < give_up) {
    if (IsListening(port)) return true;
    if (still_alive && !still_alive()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return IsListening(port);
}

}  // namespace hotfix::testsupport
