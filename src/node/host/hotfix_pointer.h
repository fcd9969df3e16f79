// The hotfix pointer: the file check-hotfix stages and download-hotfix reads
// (/opt/azure/containers/aks-node-controller-hotfix.json), and the served config that fills
// it. Shape: {"version":"…","scripts_version":"…","hotfixes":{"YYYYMM.DD":"YYYYMM.DD.PATCH"}}.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/status.h"

namespace hotfix::node {

using HotfixMap = std::map<std::string, std::string>;  // sorted: serialised in key order

// The largest pointer file ReadHotfixPointer reads. A pointer is a few hundred bytes; anything
// near this is not a pointer, and staging refuses to write what this would refuse to read.
inline constexpr size_t kMaxPointerBytes = size_t{1} << 20;

struct HotfixPointer {
  std::string version;          // legacy single target
  std::string scripts_version;  // CSE-scripts target
  HotfixMap hotfixes;           // base -> target
  bool operator==(const HotfixPointer&) const = default;
};

// Decodes like Go's encoding/json into the reference's struct: keys match case-insensitively,
// unknown keys are ignored, null is unset, a non-string value or a non-object is an error.
// Input that is empty after trimming whitespace is the zero pointer, not an error. Invalid
// UTF-8 and unpaired \u surrogate escapes inside strings become U+FFFD, as Go decodes them.
// Errors read "unmarshaling hotfix pointer JSON: <what is wrong>".
StatusOr<HotfixPointer> ParseHotfixPointer(std::string_view json);

// Compact JSON, keys in the order version, scripts_version, hotfixes; empty version fields
// omitted, hotfixes always present; '<', '>' and '&' escaped as Go does.
std::string SerializeHotfixPointer(const HotfixPointer& pointer);

// The cold-start shape, Go's struct{Hotfixes map[string]string `json:"hotfixes"`}: the
// top-level "hotfixes" map of a JSON document decoded with the same encoding/json rules, every
// other key ignored whatever its type. An absent or null map is empty. The input is not
// trimmed; the error is the decoder's own text, without a prefix.
StatusOr<HotfixMap> DecodeLenientHotfixes(std::string_view json);

// The pointer file as download-hotfix reads it: a missing or blank file is the zero pointer;
// other read errors and bad JSON are errors ("parsing hotfix config <path>: …").
StatusOr<HotfixPointer> ReadHotfixPointer(const std::string& path);

// "202604.01.3" -> "202604.01". Needs three non-empty dot-separated parts after trimming;
// otherwise the error `version "<v>" is not in YYYYMM.DD.PATCH form`.
StatusOr<std::string> HotfixBaseFromVersion(std::string_view version);

// The target for a node running `current`: with a non-empty map, the trimmed entry for its
// base (default deny: "" when absent or when the base cannot be derived, logged as WARN
// "cannot derive hotfix base from current version, skipping hotfix"); with an empty map, the
// trimmed legacy version.
std::string ResolveVersion(const HotfixPointer& pointer, std::string_view current, Logger& log);

}  // namespace hotfix::node
