#include "common/host_port.h"

namespace hotfix {

std::string JoinHostPort(std::string_view host, std::string_view port) {
  return BracketHost(host) + ":" + std::string(port);
}

std::string JoinHostPort(std::string_view host, uint16_t port) {
  return JoinHostPort(host, std::to_string(port));
}

std::string BracketHost(std::string_view host) {
  if (host.find(':') != std::string_view::npos) return "[" + std::string(host) + "]";
  return std::string(host);
}

// Hand-written because the verdicts must be Go's, bracket and colon quirks included, and no C
// or C++ library splits host:port by those rules.
std::optional<HostPort> SplitHostPort(std::string_view hostport) {
  const size_t last_colon = hostport.rfind(':');
  if (last_colon == std::string_view::npos) return std::nullopt;  // missing port
  std::string_view host;
  size_t no_open_from = 0, no_close_from = 0;
  if (hostport.front() == '[') {
    const size_t end = hostport.find(']');
    // No ']', nothing after it, or not followed by the last colon: Go's three errors.
    if (end == std::string_view::npos || end + 1 != last_colon) return std::nullopt;
    host = hostport.substr(1, end - 1);
    no_open_from = 1;
    no_close_from = end + 1;
  } else {
    host = hostport.substr(0, last_colon);
    if (host.find(':') != std::string_view::npos) return std::nullopt;  // too many colons
  }
  if (hostport.find('[', no_open_from) != std::string_view::npos) return std::nullopt;
  if (hostport.find(']', no_close_from) != std::string_view::npos) return std::nullopt;
  return HostPort{host, hostport.substr(last_colon + 1)};
}

std::optional<uint16_t> ParsePort(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  uint32_t port = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
    if (port > 65535) return std::nullopt;
  }
  if (port == 0) return std::nullopt;
  return static_cast<uint16_t>(port);
}

}  // namespace hotfix
