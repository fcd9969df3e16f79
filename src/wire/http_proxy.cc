#include "wire/http_proxy.h"

#include <arpa/inet.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/base64.h"
#include "common/host_port.h"
#include "common/text.h"

namespace hotfix::wire {
namespace {

std::string_view TrimSpace(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

// ---- IP addresses with Go's net.IP equality: an IPv4-mapped IPv6 address is IPv4. ----

struct IpAddr {
  bool v4 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4 uses the first 4

  size_t size() const { return v4 ? 4 : 16; }
  bool operator==(const IpAddr& o) const { return v4 == o.v4 && bytes == o.bytes; }
};

// text_v4 is set when the text itself is dotted IPv4 (CIDR sizes its mask by the text).
std::optional<IpAddr> ParseIp(std::string_view text, bool* text_v4 = nullptr) {
  if (text.size() > 64) return std::nullopt;
  std::string s(text);
  IpAddr ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) {
    ip.v4 = true;
    if (text_v4 != nullptr) *text_v4 = true;
    return ip;
  }
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) != 1) return std::nullopt;
  if (text_v4 != nullptr) *text_v4 = false;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(ip.bytes.data(), kMapped, sizeof(kMapped)) == 0) {
    std::memmove(ip.bytes.data(), ip.bytes.data() + 12, 4);
    std::memset(ip.bytes.data() + 4, 0, 12);
    ip.v4 = true;
  }
  return ip;
}

bool IsLoopback(const IpAddr& ip) {
  if (ip.v4) return ip.bytes[0] == 127;
  static constexpr std::array<uint8_t, 16> kLoopback6 = {0, 0, 0, 0, 0, 0, 0, 0,
                                                         0, 0, 0, 0, 0, 0, 0, 1};
  return ip.bytes == kLoopback6;
}

struct Cidr {
  // A CIDR written in IPv6 form (even "::ffff:a.b.c.d/n") never contains an IPv4 address in
  // Go, because Go compares the 4-byte form of the address against a 16-byte network.
  bool v4 = false;
  std::array<uint8_t, 16> base{};
  int bits = 0;

  bool Contains(const IpAddr& ip) const {
    if (ip.v4 != v4) return false;
    for (int i = 0; i < bits; ++i) {
      int mask = 0x80 >> (i % 8);
      if ((base[i / 8] & mask) != (ip.bytes[i / 8] & mask)) return false;
    }
    return true;
  }
};

std::optional<Cidr> ParseCidr(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  bool text_v4 = false;
  auto ip = ParseIp(text.substr(0, slash), &text_v4);
  std::string_view digits = text.substr(slash + 1);
  if (!ip || digits.empty() || digits.size() > 4) return std::nullopt;
  int bits = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    bits = bits * 10 + (c - '0');
  }
  Cidr cidr;
  cidr.v4 = text_v4;
  if (bits > (text_v4 ? 32 : 128)) return std::nullopt;
  cidr.bits = bits;
  // Undo the IPv4-mapped folding: this network keeps the family its text was written in.
  if (!text_v4 && ip->v4) {
    cidr.base = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    std::memcpy(cidr.base.data() + 12, ip->bytes.data(), 4);
  } else {
    cidr.base = ip->bytes;
  }
  return cidr;
}

// ---- NO_PROXY, as golang.org/x/net/http/httpproxy's config.init and useProxy. ----

struct NoProxyRules {
  bool all = false;
  std::vector<Cidr> cidrs;
  struct IpRule {
    IpAddr ip;
    std::string port;  // empty: any port
  };
  std::vector<IpRule> ips;
  struct DomainRule {
    std::string suffix;  // always starts with '.'
    std::string port;
    bool match_host;  // written without a leading dot: the bare domain matches too
  };
  std::vector<DomainRule> domains;
};

void AddNoProxyEntry(std::string_view entry, NoProxyRules& rules) {
  if (auto cidr = ParseCidr(entry)) {
    rules.cidrs.push_back(*cidr);
    return;
  }
  std::string_view host = entry, port;
  // SplitHostPort has removed the brackets of an IPv6 host already.
  if (std::optional<HostPort> split = SplitHostPort(entry)) {
    host = split->host;
    port = split->port;
    if (host.empty()) return;  // ":80" names nothing
  }
  if (auto ip = ParseIp(host)) {
    rules.ips.push_back({*ip, std::string(port)});
    return;
  }
  if (host.empty()) return;
  if (host.substr(0, 2) == "*.") host.remove_prefix(1);
  bool match_host = host.front() != '.';
  std::string suffix = match_host ? "." + std::string(host) : std::string(host);
  rules.domains.push_back({std::move(suffix), std::string(port), match_host});
}

NoProxyRules ParseNoProxy(std::string_view no_proxy) {
  NoProxyRules rules;
  while (!no_proxy.empty()) {
    size_t comma = no_proxy.find(',');
    std::string entry = AsciiLower(TrimSpace(no_proxy.substr(0, comma)));
    no_proxy = comma == std::string_view::npos ? std::string_view() : no_proxy.substr(comma + 1);
    if (entry.empty()) continue;
    if (entry == "*") {
      rules.all = true;
      return rules;
    }
    AddNoProxyEntry(entry, rules);
  }
  return rules;
}

bool UseProxy(const NoProxyRules& rules, std::string_view dest_host, uint16_t dest_port) {
  // Go splits the canonical "host:port" again; a host that does not survive that goes direct.
  const std::string addr = JoinHostPort(dest_host, dest_port);
  const std::optional<HostPort> split = SplitHostPort(addr);
  if (!split) return false;
  const std::string_view host = split->host, port = split->port;
  if (host == "localhost") return false;
  auto ip = ParseIp(host);
  if (ip && IsLoopback(*ip)) return false;
  if (rules.all) return false;

  std::string name = AsciiLower(TrimSpace(host));
  if (ip) {
    for (const auto& cidr : rules.cidrs) {
      if (cidr.Contains(*ip)) return false;
    }
    for (const auto& rule : rules.ips) {
      if (rule.ip == *ip && (rule.port.empty() || rule.port == port)) return false;
    }
  }
  for (const auto& rule : rules.domains) {
    bool suffix =
        name.size() >= rule.suffix.size() &&
        name.compare(name.size() - rule.suffix.size(), rule.suffix.size(), rule.suffix) == 0;
    bool exact = rule.match_host && name == std::string_view(rule.suffix).substr(1);
    if ((suffix || exact) && (rule.port.empty() || rule.port == port)) return false;
  }
  return true;
}

// ---- The proxy URL: http://[user[:password]@]host[:port][/...], or host[:port]. ----

// Strict, as Go's url.Parse: a malformed escape is an error, not literal text.
std::optional<std::string> UnescapeUserinfo(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size() || HexDigitValue(s[i + 1]) < 0 || HexDigitValue(s[i + 2]) < 0)
      return std::nullopt;
    out.push_back(static_cast<char>(HexDigitValue(s[i + 1]) * 16 + HexDigitValue(s[i + 2])));
    i += 2;
  }
  return out;
}

// Go's basicAuth(user, password): always "user:password", even without a password.
std::optional<std::string> BasicAuth(std::string_view userinfo) {
  size_t colon = userinfo.find(':');
  auto user = UnescapeUserinfo(userinfo.substr(0, colon));
  auto password = UnescapeUserinfo(colon == std::string_view::npos ? std::string_view()
                                                                   : userinfo.substr(colon + 1));
  if (!user || !password) return std::nullopt;
  return "Basic " + EncodeStdBase64(*user + ":" + *password);
}

bool IsSchemeChar(char c) { return IsAsciiAlnum(c) || c == '+' || c == '-' || c == '.'; }

bool IsHostChar(char c) { return IsAsciiAlnum(c) || c == '-' || c == '.' || c == '_'; }

Status ParseHostPort(std::string_view hostport, ProxyConfig& config) {
  std::string_view host = hostport, port;
  if (hostport.front() == '[') {
    size_t end = hostport.find(']');
    if (end == std::string_view::npos) return Status::InvalidArgument("unterminated IPv6 host");
    host = hostport.substr(1, end - 1);
    std::string_view after = hostport.substr(end + 1);
    if (!after.empty() && after.front() != ':') return Status::InvalidArgument("bad port");
    if (!after.empty()) port = after.substr(1);
    std::string text(host);
    in6_addr unused;
    if (inet_pton(AF_INET6, text.c_str(), &unused) != 1) {
      return Status::InvalidArgument("bad IPv6 host");
    }
  } else {
    size_t colon = hostport.rfind(':');
    if (colon != std::string_view::npos) {
      host = hostport.substr(0, colon);
      port = hostport.substr(colon + 1);
    }
    if (host.empty()) return Status::InvalidArgument("missing host");
    for (char c : host) {
      if (!IsHostChar(c)) return Status::InvalidArgument("invalid character in host");
    }
  }
  // No port: 80, the default of an http:// proxy.
  const std::optional<uint16_t> parsed_port =
      port.empty() ? std::optional<uint16_t>(80) : ParsePort(port);
  if (!parsed_port) return Status::InvalidArgument("bad port");
  config.host = std::string(host);
  config.port = *parsed_port;
  return Status::Ok();
}

// Errors never echo the value: it may carry a password.
StatusOr<ProxyConfig> ParseProxyUrl(std::string_view value) {
  std::string_view rest = value;
  size_t sep = rest.find("://");
  if (sep != std::string_view::npos) {
    std::string_view scheme = rest.substr(0, sep);
    bool valid = !scheme.empty();
    for (char c : scheme) valid = valid && IsSchemeChar(c);
    if (!valid) return Status::InvalidArgument("malformed URL scheme");
    std::string lower = AsciiLower(scheme);
    if (lower == "https") {
      return Status::InvalidArgument("https:// proxies are not supported; use an http:// proxy");
    }
    if (lower != "http")
      return Status::InvalidArgument("unsupported proxy scheme \"" + lower + "\"");
    rest = rest.substr(sep + 3);
  }
  // Like Go, a path, query or fragment after the authority is ignored.
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  ProxyConfig config;
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    auto auth = BasicAuth(authority.substr(0, at));
    if (!auth) return Status::InvalidArgument("malformed percent-escape in the credentials");
    config.proxy_authorization = std::move(*auth);
    authority = authority.substr(at + 1);
  }
  if (authority.empty()) return Status::InvalidArgument("missing host");
  if (Status host_status = ParseHostPort(authority, config); !host_status.ok()) return host_status;
  return config;
}

StatusOr<std::optional<ProxyConfig>> Select(std::string_view var_name, std::string_view https_proxy,
                                            std::string_view no_proxy, std::string_view dest_host,
                                            uint16_t dest_port) {
  if (https_proxy.empty()) return std::optional<ProxyConfig>();
  // NO_PROXY first: a bypassed host connects directly even if the proxy URL is broken.
  if (!UseProxy(ParseNoProxy(no_proxy), dest_host, dest_port)) return std::optional<ProxyConfig>();
  auto config = ParseProxyUrl(https_proxy);
  if (!config.ok()) return config.status().Annotate("invalid " + std::string(var_name));
  return std::optional<ProxyConfig>(std::move(config).value());
}

// Go's getEnvAny: the first variable with a non-empty value.
std::pair<std::string_view, std::string_view> GetEnvAny(const char* upper, const char* lower) {
  for (const char* name : {upper, lower}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return {name, value};
  }
  return {upper, {}};
}

}  // namespace

StatusOr<std::optional<ProxyConfig>> ProxyFromEnvironment(std::string_view scheme,
                                                          std::string_view dest_host,
                                                          uint16_t dest_port) {
  std::pair<std::string_view, std::string_view> proxy;
  if (scheme == "https") {
    proxy = GetEnvAny("HTTPS_PROXY", "https_proxy");
  } else if (std::getenv("REQUEST_METHOD") != nullptr) {
    // Go's httpproxy: in a CGI process HTTP_PROXY may come from a request's "Proxy:" header
    // (httpoxy), so only the lower-case name counts there.
    proxy = GetEnvAny("http_proxy", "http_proxy");
  } else {
    proxy = GetEnvAny("HTTP_PROXY", "http_proxy");
  }
  auto no_proxy = GetEnvAny("NO_PROXY", "no_proxy");
  return Select(proxy.first, proxy.second, no_proxy.second, dest_host, dest_port);
}

StatusOr<std::optional<ProxyConfig>> SelectProxy(std::string_view https_proxy,
                                                 std::string_view no_proxy,
                                                 std::string_view dest_host, uint16_t dest_port) {
  return Select("HTTPS_PROXY", https_proxy, no_proxy, dest_host, dest_port);
}

}  // namespace hotfix::wire
