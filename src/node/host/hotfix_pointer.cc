#include "node/host/hotfix_pointer.h"

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "node/go/go_json.h"
#include "node/go/go_strings.h"
#include "node/go/go_utf8.h"

namespace hotfix::node {

namespace {

HotfixPointer FromGo(GoHotfixConfig decoded) {
  return HotfixPointer{std::move(decoded.version), std::move(decoded.scripts_version),
                       std::move(decoded.hotfixes)};
}

}  // namespace

StatusOr<HotfixPointer> ParseHotfixPointer(std::string_view json) {
  std::string_view trimmed = TrimSpaceLikeGo(json);
  if (trimmed.empty()) return HotfixPointer{};
  StatusOr<GoHotfixConfig> decoded = DecodeLikeGo(trimmed, GoHotfixStruct::kHotfixConfig);
  if (!decoded.ok()) return decoded.status().Annotate("unmarshaling hotfix pointer JSON");
  return FromGo(std::move(decoded).value());
}

StatusOr<HotfixMap> DecodeLenientHotfixes(std::string_view json) {
  StatusOr<GoHotfixConfig> decoded = DecodeLikeGo(json, GoHotfixStruct::kColdStart);
  if (!decoded.ok()) return decoded.status();
  return std::move(decoded->hotfixes);
}

std::string SerializeHotfixPointer(const HotfixPointer& pointer) {
  // Field order is part of the format: version, scripts_version, hotfixes.
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  if (!pointer.version.empty()) doc["version"] = ReplaceInvalidUtf8(pointer.version);
  if (!pointer.scripts_version.empty()) {
    doc["scripts_version"] = ReplaceInvalidUtf8(pointer.scripts_version);
  }
  HotfixMap clean;  // sorted bytewise, as Go sorts map keys
  for (const auto& [base, target] : pointer.hotfixes) {
    clean[ReplaceInvalidUtf8(base)] = ReplaceInvalidUtf8(target);
  }
  doc["hotfixes"] = clean;
  return EscapeJsonLikeGo(doc.dump());
}

StatusOr<HotfixPointer> ReadHotfixPointer(const std::string& path) {
  StatusOr<std::string> content = ReadFileToString(path, kMaxPointerBytes);
  if (!content.ok()) {
    if (content.status().IsNotFound()) return HotfixPointer{};
    return content.status();
  }
  if (TrimSpaceLikeGo(*content).empty()) return HotfixPointer{};
  // The reference decodes the untrimmed bytes here, unlike the served body.
  StatusOr<GoHotfixConfig> decoded = DecodeLikeGo(*content, GoHotfixStruct::kHotfixConfig);
  if (!decoded.ok()) return decoded.status().Annotate("parsing hotfix config " + path);
  return FromGo(std::move(decoded).value());
}

StatusOr<std::string> HotfixBaseFromVersion(std::string_view version) {
  std::string_view v = TrimSpaceLikeGo(version);
  const size_t first = v.find('.');
  const size_t second = first == std::string_view::npos ? first : v.find('.', first + 1);
  // strings.SplitN(v, ".", 3): the third part keeps any further dots.
  if (second == std::string_view::npos || first == 0 || second == first + 1 ||
      second + 1 == v.size()) {
    return Status::InvalidArgument("version " + QuoteLikeGo(version) +
                                   " is not in YYYYMM.DD.PATCH form");
  }
  return std::string(v.substr(0, second));
}

std::string ResolveVersion(const HotfixPointer& pointer, std::string_view current, Logger& log) {
  if (pointer.hotfixes.empty()) return std::string(TrimSpaceLikeGo(pointer.version));
  // The map is authoritative: no entry for this base means no hotfix (default deny).
  StatusOr<std::string> base = HotfixBaseFromVersion(current);
  if (!base.ok()) {
    log.Warn("cannot derive hotfix base from current version, skipping hotfix",
             {{"current", current}, {"error", base.status()}});
    return "";
  }
  auto it = pointer.hotfixes.find(*base);
  return it == pointer.hotfixes.end() ? "" : std::string(TrimSpaceLikeGo(it->second));
}

}  // namespace hotfix::node
