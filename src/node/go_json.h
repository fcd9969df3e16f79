// The Go compatibility the node's JSON and text go through: the reference (AgentBaker's
// aks-node-controller, in Go) reads and writes the same files, so where Go's standard library
// has a rule of its own (strings.TrimSpace, strconv.Quote, encoding/json's decoding and
// json.Marshal's escaping) this is a port of it. The protojson decoder of the node config is
// beside it (node/node_config_json.h).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::node {

struct HotfixPointer;

// strings.TrimSpace: Unicode white space at both ends, as every Go reader of these values trims.
std::string_view TrimSpaceLikeGo(std::string_view s);

// strconv.Quote, for %q in error texts: double-quoted, Go's escapes, invalid UTF-8 as \xNN.
// (Go's full IsPrint table is not reproduced: unassigned and private-use code points are
// written verbatim.)
std::string QuoteLikeGo(std::string_view s);

// Every byte that does not start a valid UTF-8 sequence becomes U+FFFD, as Go's JSON codec
// does, so that nlohmann (which refuses invalid UTF-8) can encode any string.
std::string ReplaceInvalidUtf8(std::string_view text);

// json.Marshal's extra escaping applied to compact JSON from nlohmann::json::dump: '<', '>',
// '&', U+2028 and U+2029 become \u escapes. Used by every writer of Go-compatible JSON.
std::string EscapeJsonLikeGo(std::string_view compact_json);

// The reference's two Go structs the pointer's JSON is decoded into.
enum class GoHotfixStruct {
  // hotfixConfig{Version, ScriptsVersion string; Hotfixes map[string]string}: the pointer.
  kHotfixConfig,
  // struct{Hotfixes map[string]string `json:"hotfixes"`}: the node config's cold-start map
  // (version and scripts_version are ignored like every other key).
  kColdStart,
};

// json.Unmarshal into that struct, with encoding/json's rules: keys match case-insensitively
// (Go's foldName), unknown keys are ignored whatever their type, null leaves a field unset,
// a non-string value or a non-object is an error in Go's words ("json: cannot unmarshal
// number into Go struct field hotfixConfig.version of type string"), a syntax error wins over
// a type error. Invalid UTF-8 and unpaired \u surrogate escapes inside strings become U+FFFD,
// and numbers too large for a double are accepted, as Go decodes them.
StatusOr<HotfixPointer> DecodeLikeGo(std::string_view json, GoHotfixStruct into);

}  // namespace hotfix::node
