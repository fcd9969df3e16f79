// Go's encoding/json as the node's JSON goes through it: the reference (AgentBaker's
// aks-node-controller, in Go) reads and writes the same files, so where encoding/json has a
// rule of its own (its decoding into the reference's structs, json.Marshal's escaping) this is
// a port of it. Its text rules are beside it (node/go/go_utf8.h, node/go/go_strings.h), and so is
// the protojson decoder of the node config (node/host/node_config_json.h).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::node {

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

// What those structs hold once decoded: hotfixConfig's three fields (the cold-start struct
// fills only hotfixes). node/host/hotfix_pointer.h makes its HotfixPointer of it; this file knows
// only Go's rules, not the pointer.
struct GoHotfixConfig {
  std::string version;
  std::string scripts_version;
  std::map<std::string, std::string> hotfixes;
};

// json.Unmarshal into that struct, with encoding/json's rules: keys match case-insensitively
// (Go's foldName), unknown keys are ignored whatever their type, null leaves a field unset,
// a non-string value or a non-object is an error in Go's words ("json: cannot unmarshal
// number into Go struct field hotfixConfig.version of type string"), a syntax error wins over
// a type error. Invalid UTF-8 and unpaired \u surrogate escapes inside strings become U+FFFD,
// and numbers too large for a double are accepted, as Go decodes them.
StatusOr<GoHotfixConfig> DecodeLikeGo(std::string_view json, GoHotfixStruct into);

}  // namespace hotfix::node
