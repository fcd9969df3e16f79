// Which HTTP CONNECT proxy, if any, a TLS connection goes through. Mirrors Go's
// golang.org/x/net/http/httpproxy (what grpc-go, and so the reference, use): HTTPS_PROXY or
// https_proxy names the proxy; NO_PROXY or no_proxy lists hosts, domains (".example.com" or
// "example.com" both match subdomains), IP addresses, CIDR blocks and "*" that bypass it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::wire {

struct ProxyConfig {
  std::string host;  // no brackets for IPv6
  uint16_t port = 0;
  // "Basic <base64(user:password)>" when the proxy URL carries userinfo; empty otherwise.
  std::string proxy_authorization;
};

// Looks up the proxy for dest_host:dest_port in the environment. nullopt: connect directly.
// An unparseable HTTPS_PROXY is an error naming the variable (the value may hold a password,
// so it is not echoed).
StatusOr<std::optional<ProxyConfig>> ProxyFromEnvironment(std::string_view dest_host,
                                                          uint16_t dest_port);

// The same decision with explicit values, for tests.
StatusOr<std::optional<ProxyConfig>> SelectProxy(std::string_view https_proxy,
                                                 std::string_view no_proxy,
                                                 std::string_view dest_host, uint16_t dest_port);

}  // namespace hotfix::wire
