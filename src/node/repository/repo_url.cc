#include "node/repository/repo_url.h"

#include <arpa/inet.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace hotfix::node::repository {
namespace {

// Go's net.IP IsLoopback || IsPrivate || IsLinkLocalUnicast, on an IP literal.
bool IsLocalIp(const std::string& host) {
  std::array<uint8_t, 16> b{};
  if (inet_pton(AF_INET, host.c_str(), b.data()) == 1) {
    return b[0] == 127 || b[0] == 10 || (b[0] == 172 && (b[1] & 0xf0) == 16) ||
           (b[0] == 192 && b[1] == 168) || (b[0] == 169 && b[1] == 254);
  }
  if (inet_pton(AF_INET6, host.c_str(), b.data()) != 1) return false;
  static constexpr std::array<uint8_t, 12> kMapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(b.data(), kMapped.data(), kMapped.size()) == 0) {
    char v4[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, b.data() + 12, v4, sizeof v4);
    return IsLocalIp(v4);
  }
  static constexpr std::array<uint8_t, 16> kLoopback = {0, 0, 0, 0, 0, 0, 0, 0,
                                                        0, 0, 0, 0, 0, 0, 0, 1};
  return b == kLoopback || (b[0] & 0xfe) == 0xfc || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80);
}

// Go's path.Clean, for a relative path: "a/./b//c/../d" -> "a/b/d"; "" -> ".".
std::string CleanRelative(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t climbs = 0;  // leading ".." that stay (nothing left to cancel)
  while (!path.empty()) {
    const size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    path.remove_prefix(slash == std::string_view::npos ? path.size() : slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) {
        parts.pop_back();
      } else {
        ++climbs;
      }
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (size_t i = 0; i < climbs; ++i) out += out.empty() ? ".." : "/..";
  for (std::string_view part : parts) {
    if (!out.empty()) out += '/';
    out += part;
  }
  return out.empty() ? "." : out;
}

bool IsPathPrefix(std::string_view prefix, std::string_view path) {
  return path.size() >= prefix.size() && path.substr(0, prefix.size()) == prefix;
}

}  // namespace

StatusOr<wire::Url> ParseRepositoryBase(std::string_view text) {
  StatusOr<wire::Url> url = wire::ParseAbsoluteUrl(text);
  if (!url.ok()) {
    return Status::FailedPrecondition("repository URL: " + url.status().message());
  }
  const std::string shown = url->ToString();
  if (url->scheme != "http" && url->scheme != "https") {
    return Status::FailedPrecondition("repository URL " + shown + " is not http(s)");
  }
  if (url->has_userinfo) {
    return Status::FailedPrecondition("repository URL must not carry credentials");
  }
  if (url->query) {
    return Status::FailedPrecondition("repository URL " + shown + " has a query");
  }
  if (url->scheme == "http" && url->host != "localhost" && !IsLocalIp(url->host)) {
    return Status::FailedPrecondition("repository URL " + shown +
                                      ": plain http only to localhost or a loopback, private or "
                                      "link-local address");
  }
  url->fragment.reset();
  if (url->path.empty() || url->path.back() != '/') url->path += '/';
  return url;
}

StatusOr<wire::Url> RepositoryFileUrl(const wire::Url& base, std::string_view relative) {
  const std::string shown(relative.substr(0, 256));
  auto refuse = [&](std::string_view why) {
    return Status::DataLoss("repository path \"" + shown + "\" " + std::string(why));
  };
  if (relative.empty()) return refuse("is empty");
  if (relative.front() == '/') return refuse("is absolute");
  if (relative.find("://") != std::string_view::npos || relative.substr(0, 2) == "//") {
    return refuse("names another location");
  }
  if (relative.find_first_of("?#") != std::string_view::npos) {
    return refuse("has a query or fragment");
  }
  // A scheme ("http:x") or a character a URL path cannot carry unencoded.
  const size_t colon = relative.find(':');
  if (colon != std::string_view::npos && relative.substr(0, colon).find('/') == std::string::npos) {
    return refuse("names a scheme");
  }
  for (char c : relative) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return refuse("holds a space, control or non-ASCII byte");
    }
  }
  // A server decodes "%2e%2e" to "..": no escape may hide a step out of the base. The paths
  // this takes (index, primary metadata, pool and Packages/ paths) never need one.
  if (relative.find('%') != std::string_view::npos) return refuse("holds a percent-escape");
  const std::string cleaned = CleanRelative(relative);
  if (cleaned == "." || cleaned == ".." || cleaned.substr(0, 3) == "../") {
    return refuse("escapes the repository");
  }
  wire::Url url = base;
  url.path = base.path + cleaned;
  url.query.reset();
  url.fragment.reset();
  if (!WithinRepository(base, url)) return refuse("escapes the repository");
  return url;
}

bool WithinRepository(const wire::Url& base, const wire::Url& target) {
  if (target.scheme != base.scheme || target.host != base.host ||
      target.EffectivePort() != base.EffectivePort() || target.has_userinfo) {
    return false;
  }
  return IsPathPrefix(base.path, wire::RemoveDotSegments(target.path));
}

}  // namespace hotfix::node::repository
