// Absolute http(s) URLs and the references that lead from one to another (a redirect's
// Location), as RFC 3986 defines them. Written here because Debian 12's URL libraries are either
// out of reach (Boost.URL needs Boost 1.81; libcurl's URL API would bring libcurl's start-up
// cost into every node boot) or not kept up to date (uriparser 0.9.7 without the 0.9.8 security
// fixes); it is small, strict and fuzzed (tests/fuzz/url_fuzz.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::wire {

struct Url {
  std::string scheme;         // lower-cased
  bool has_userinfo = false;  // "user[:password]@" was present (its text is never kept)
  std::string host;           // without brackets; a DNS name is lower-cased
  std::optional<uint16_t> port;
  std::string path;  // as written (percent-encoding kept); empty or starting with '/'
  std::optional<std::string> query;     // after '?'
  std::optional<std::string> fragment;  // after '#'

  // The port, or the scheme's default (80 for http, 443 for https, 0 otherwise).
  uint16_t EffectivePort() const;
  // "host[:port]" with an IPv6 host in brackets; the port only when given.
  std::string Authority() const;
  // path (or "/" when empty) and "?query": an HTTP request target.
  std::string RequestTarget() const;
  // The URL written back (userinfo never included).
  std::string ToString() const;
};

// scheme "://" [userinfo "@"] host [":" port] [path] ["?" query] ["#" fragment]. The scheme is
// letters, digits, '+', '-', '.' (starting with a letter); the host a DNS name of letters,
// digits, '-', '.' and '_' or a bracketed IPv6 literal; the port 1 to 65535. No byte below 0x21
// or above 0x7e anywhere (they must be percent-encoded), at most 8 KiB. InvalidArgument
// naming the part otherwise; the URL is not echoed (it may hold a password).
StatusOr<Url> ParseAbsoluteUrl(std::string_view text);

// RFC 3986 section 5.2: the target of `reference` (an absolute URL, "//authority...",
// "/path", "path", "?query" or "#fragment") read against `base`, with dot segments removed.
StatusOr<Url> ResolveReference(const Url& base, std::string_view reference);

// RFC 3986 section 5.2.4: "/a/b/../c/./d" -> "/a/c/d". ".." never climbs above the root.
std::string RemoveDotSegments(std::string_view path);

}  // namespace hotfix::wire
