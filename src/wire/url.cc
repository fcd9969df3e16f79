#include "wire/url.h"

#include <arpa/inet.h>

#include <algorithm>

#include "common/host_port.h"
#include "common/text.h"

namespace hotfix::wire {
namespace {

constexpr size_t kMaxUrlBytes = 8 * 1024;

bool IsSchemeChar(char c) { return IsAsciiAlnum(c) || c == '+' || c == '-' || c == '.'; }
bool IsHostChar(char c) { return IsAsciiAlnum(c) || c == '-' || c == '.' || c == '_'; }
bool IsVisibleAscii(char c) { return c > 0x20 && c < 0x7f; }

Status Bad(std::string_view why) {
  return Status::InvalidArgument("invalid URL: " + std::string(why));
}

// The scheme's length, or 0 when `text` does not start with one followed by ':'.
size_t SchemeLength(std::string_view text) {
  if (text.empty() || !IsAsciiAlpha(text[0])) return 0;
  size_t i = 1;
  while (i < text.size() && IsSchemeChar(text[i])) ++i;
  return i < text.size() && text[i] == ':' ? i : 0;
}

// "[userinfo@]host[:port]" into url.
Status ParseAuthority(std::string_view authority, Url& url) {
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    url.has_userinfo = true;
    authority.remove_prefix(at + 1);
  }
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Bad("unterminated IPv6 host");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return Bad("junk after the IPv6 host");
    if (!after.empty()) port = after.substr(1);
    in6_addr unused;
    if (inet_pton(AF_INET6, std::string(host).c_str(), &unused) != 1) {
      return Bad("bad IPv6 host");
    }
  } else {
    const size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
    }
    if (!std::all_of(host.begin(), host.end(), IsHostChar)) {
      return Bad("invalid character in host");
    }
  }
  if (host.empty()) return Bad("no host");
  url.host = AsciiLower(host);
  if (authority.back() == ':') return Bad("empty port");
  if (!port.empty()) {
    url.port = ParsePort(port);
    if (!url.port) return Bad("bad port");
  }
  return Status::Ok();
}

// path [?query] [#fragment] of a reference or a URL's tail, into url.
void SplitTail(std::string_view tail, Url& url) {
  const size_t hash = tail.find('#');
  if (hash != std::string_view::npos) {
    url.fragment = std::string(tail.substr(hash + 1));
    tail = tail.substr(0, hash);
  }
  const size_t question = tail.find('?');
  if (question != std::string_view::npos) {
    url.query = std::string(tail.substr(question + 1));
    tail = tail.substr(0, question);
  }
  url.path = std::string(tail);
}

// RFC 3986 5.2.3: the base's path up to its last '/', then the reference's.
std::string MergePaths(const Url& base, std::string_view reference_path) {
  if (!base.host.empty() && base.path.empty()) return "/" + std::string(reference_path);
  const size_t slash = base.path.rfind('/');
  if (slash == std::string::npos) return std::string(reference_path);
  return base.path.substr(0, slash + 1) + std::string(reference_path);
}

}  // namespace

uint16_t Url::EffectivePort() const {
  if (port) return *port;
  if (scheme == "http") return 80;
  if (scheme == "https") return 443;
  return 0;
}

std::string Url::Authority() const { return port ? JoinHostPort(host, *port) : BracketHost(host); }

std::string Url::RequestTarget() const {
  std::string target = path.empty() ? "/" : path;
  if (query) target += "?" + *query;
  return target;
}

std::string Url::ToString() const {
  std::string out = scheme + "://" + Authority() + path;
  if (query) out += "?" + *query;
  if (fragment) out += "#" + *fragment;
  return out;
}

StatusOr<Url> ParseAbsoluteUrl(std::string_view text) {
  if (text.size() > kMaxUrlBytes) return Bad("longer than 8 KiB");
  if (!std::all_of(text.begin(), text.end(), IsVisibleAscii)) {
    return Bad("spaces, control and non-ASCII bytes must be percent-encoded");
  }
  const size_t scheme_len = SchemeLength(text);
  if (scheme_len == 0) return Bad("no scheme");
  if (text.substr(scheme_len, 3) != "://") return Bad("no authority");
  Url url;
  url.scheme = AsciiLower(text.substr(0, scheme_len));
  std::string_view rest = text.substr(scheme_len + 3);
  const size_t authority_end = rest.find_first_of("/?#");
  if (Status st = ParseAuthority(rest.substr(0, authority_end), url); !st.ok()) return st;
  if (authority_end != std::string_view::npos) SplitTail(rest.substr(authority_end), url);
  return url;
}

StatusOr<Url> ResolveReference(const Url& base, std::string_view reference) {
  if (reference.size() > kMaxUrlBytes) return Bad("longer than 8 KiB");
  if (!std::all_of(reference.begin(), reference.end(), IsVisibleAscii)) {
    return Bad("spaces, control and non-ASCII bytes must be percent-encoded");
  }
  if (SchemeLength(reference) > 0) {
    StatusOr<Url> absolute = ParseAbsoluteUrl(reference);
    if (!absolute.ok()) return absolute;
    absolute->path = RemoveDotSegments(absolute->path);
    return absolute;
  }
  Url target;
  target.scheme = base.scheme;
  if (reference.substr(0, 2) == "//") {
    reference.remove_prefix(2);
    const size_t authority_end = reference.find_first_of("/?#");
    if (Status st = ParseAuthority(reference.substr(0, authority_end), target); !st.ok()) {
      return st;
    }
    if (authority_end != std::string_view::npos) SplitTail(reference.substr(authority_end), target);
    target.path = RemoveDotSegments(target.path);
    return target;
  }
  target.has_userinfo = base.has_userinfo;
  target.host = base.host;
  target.port = base.port;
  Url tail;
  SplitTail(reference, tail);
  target.fragment = tail.fragment;
  if (tail.path.empty()) {
    target.path = base.path;
    target.query = tail.query ? tail.query : base.query;
    return target;
  }
  target.query = tail.query;
  target.path =
      RemoveDotSegments(tail.path.front() == '/' ? tail.path : MergePaths(base, tail.path));
  return target;
}

std::string RemoveDotSegments(std::string_view input) {
  std::string output;
  while (!input.empty()) {
    if (input.substr(0, 3) == "../") {
      input.remove_prefix(3);
    } else if (input.substr(0, 2) == "./") {
      input.remove_prefix(2);
    } else if (input.substr(0, 3) == "/./") {
      input.remove_prefix(2);
    } else if (input == "/.") {
      input = "/";
    } else if (input.substr(0, 4) == "/../" || input == "/..") {
      input = input.size() == 3 ? std::string_view("/") : input.substr(3);
      const size_t slash = output.rfind('/');
      output.erase(slash == std::string::npos ? 0 : slash);
    } else if (input == "." || input == "..") {
      input = {};
    } else {
      const size_t next = input.find('/', input.front() == '/' ? 1 : 0);
      const size_t take = next == std::string_view::npos ? input.size() : next;
      output.append(input.substr(0, take));
      input.remove_prefix(take);
    }
  }
  return output;
}

}  // namespace hotfix::wire
