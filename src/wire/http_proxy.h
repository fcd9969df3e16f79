// Which HTTP proxy, if any, a request goes through. Mirrors Go's golang.org/x/net/http/httpproxy
// (net/http's ProxyFromEnvironment, which the reference's repository downloads use): HTTPS_PROXY
// or https_proxy names the proxy of https:// requests (a CONNECT tunnel), HTTP_PROXY or
// http_proxy that of http:// ones (HTTP_PROXY is ignored in a CGI process, REQUEST_METHOD set);
// NO_PROXY or no_proxy lists hosts, domains (".example.com" or "example.com" both match
// subdomains), IP addresses, CIDR blocks and "*" that bypass it; localhost and loopback
// addresses never use one. Only http:// proxies are supported.
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

// Looks up the proxy for a `scheme` ("http" or "https") request to dest_host:dest_port in the
// environment. nullopt: connect directly. An unparseable or unsupported proxy URL is an error
// naming the variable (the value may hold a password, so it is not echoed).
StatusOr<std::optional<ProxyConfig>> ProxyFromEnvironment(std::string_view scheme,
                                                          std::string_view dest_host,
                                                          uint16_t dest_port);

// The same decision with explicit values, for tests.
StatusOr<std::optional<ProxyConfig>> SelectProxy(std::string_view https_proxy,
                                                 std::string_view no_proxy,
                                                 std::string_view dest_host, uint16_t dest_port);

}  // namespace hotfix::wire
