// URLs a repository's configuration and its servers hand the node: a base URL from the apt or
// yum source (wire::ParseAbsoluteUrl, then the fast path's base rules), a redirect's Location
// read against it (wire::ResolveReference), and paths from signed metadata under it
// (RepositoryFileUrl). Input: base, NUL, reference, NUL, relative path.
//
// Properties: a parsed URL written back parses to the same URL; a resolved reference with a path
// of its own has no dot segment left; a file URL RepositoryFileUrl accepts is under its base
// (WithinRepository) and its path only adds to the base's; WithinRepository never lets a URL with a
// ".." step or another authority through.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "node/repository/repo_url.h"
#include "wire/url.h"

using hotfix::wire::Url;

namespace {

bool HasDotSegment(std::string_view path) {
  return path.find("/../") != std::string_view::npos ||
         path.find("/./") != std::string_view::npos ||
         (path.size() >= 3 && path.substr(path.size() - 3) == "/..") ||
         (path.size() >= 2 && path.substr(path.size() - 2) == "/.");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto fields = SplitAtNul(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string_view base_text = fields[0];
  const std::string_view reference = fields.size() > 1 ? fields[1] : "";
  const std::string_view relative = fields.size() > 2 ? fields[2] : "";

  auto url = hotfix::wire::ParseAbsoluteUrl(base_text);
  if (url.ok()) {
    auto again = hotfix::wire::ParseAbsoluteUrl(url->ToString());
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->ToString() == url->ToString());
    FUZZ_CHECK(!url->scheme.empty());
    auto resolved = hotfix::wire::ResolveReference(*url, reference);
    // A reference with a path of its own has its dot segments removed (RFC 3986 5.2.2); an
    // empty one, or only a query or fragment, keeps the base's path as it is.
    const bool own_path = !reference.empty() && reference[0] != '?' && reference[0] != '#';
    if (resolved.ok() && own_path) FUZZ_CHECK(!HasDotSegment(resolved->path));
  }
  auto base = hotfix::node::repository::ParseRepositoryBase(base_text);
  if (!base.ok()) return 0;
  FUZZ_CHECK(!base->path.empty() && base->path.back() == '/');
  FUZZ_CHECK(!base->has_userinfo && !base->query && !base->fragment);
  auto file = hotfix::node::repository::RepositoryFileUrl(*base, relative);
  if (file.ok()) {
    FUZZ_CHECK(hotfix::node::repository::WithinRepository(*base, *file));
    FUZZ_CHECK(file->path.substr(0, base->path.size()) == base->path);
    FUZZ_CHECK(!HasDotSegment(file->path));
    FUZZ_CHECK(file->host == base->host && file->scheme == base->scheme);
  }
  auto redirect = hotfix::wire::ResolveReference(*base, reference);
  if (redirect.ok() && hotfix::node::repository::WithinRepository(*base, *redirect)) {
    FUZZ_CHECK(redirect->host == base->host);
    FUZZ_CHECK(hotfix::wire::RemoveDotSegments(redirect->path).substr(0, base->path.size()) ==
               base->path);
  }
  return 0;
}
