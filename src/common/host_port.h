// host:port text: joining, splitting and port numbers, with the rules of Go's net package
// (net.JoinHostPort, net.SplitHostPort), which the reference and grpc-go apply to the same
// values (the apiserver name, NO_PROXY entries, --connect-to).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hotfix {

// "host:port", with a host that holds a colon (IPv6) in brackets, as net.JoinHostPort.
std::string JoinHostPort(std::string_view host, std::string_view port);
std::string JoinHostPort(std::string_view host, uint16_t port);

// The host as it stands before ":port" or alone in an HTTP/2 :authority: in brackets when it
// holds a colon (IPv6), as is otherwise.
std::string BracketHost(std::string_view host);

struct HostPort {
  std::string_view host;  // brackets removed; may be empty (":80")
  std::string_view port;  // as written; not checked to be a number
};

// net.SplitHostPort, with its verdicts to the letter: nullopt where Go returns an error
// (missing port, too many colons, a '[' or ']' out of place). The views point into hostport.
std::optional<HostPort> SplitHostPort(std::string_view hostport);

// A TCP port: decimal digits only (leading zeros allowed, as Go's parsers allow them) naming
// 1 to 65535. nullopt otherwise, including for "" and 0.
std::optional<uint16_t> ParsePort(std::string_view digits);

}  // namespace hotfix
