// A component's file, `<component>.json`: its format, validated (docs/SERVICE.md, "The
// component store"; the rollouts in it, docs/ROLLOUTS.md), and one pass over a folder of them
// as the service and the operators' tools read it. No I/O but that pass; the store
// (component_store.h) is what reloads it.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "service/rollout/rollout.h"

namespace hotfix::service {

// ComponentConfig::digest's length: 48 bits tell files apart in any one fleet, and stay short
// enough for a label and a log field.
inline constexpr size_t kFileDigestHexDigits = 12;

// One component's file, validated.
struct ComponentConfig {
  std::string text;  // the file as read: what a node is served when it has no rollouts
  // The first 12 hex digits of the SHA-256 of `text`: which file a replica serves
  // (lp_component_file_info, GET /rollouts, the access log's `file_sha256`).
  std::string digest;
  // The file has a `rollouts` list: each node is served ServedHotfixesJson() of its answer
  // (docs/ROLLOUTS.md), never `text`.
  bool has_rollouts = false;
  // The top-level hotfixes map, for files of the hotfixes shape (aksNodeController, and
  // every file with rollouts); what lies beneath the rollouts.
  std::optional<std::map<std::string, std::string>> hotfixes;
  std::string hotfixes_json;  // ServedHotfixesJson(*hotfixes), made once at load (access log)
  std::vector<Rollout> rollouts;
  // Set when this config is the automatic halt's judgement of a file (auto_halt_controller.h):
  // the file as loaded. Reports are attributed by the file, so that the evidence of a halted
  // or held rollout keeps growing with its nodes' later reports.
  std::shared_ptr<const ComponentConfig> file;

  // What the node is served at `now`, and which rollouts applied (indexes).
  std::string ServedTo(const RolloutNode& node, RolloutTime now,
                       std::vector<size_t>* applied) const;
};

// Component names the service accepts: [A-Za-z][A-Za-z0-9_.-]{0,63}. Anything else is
// INVALID_ARGUMENT and never becomes a path.
bool IsValidComponentName(std::string_view name);

// Parses and validates one component's JSON: any JSON object; for "aksNodeController" the
// shape {"hotfixes":{"YYYYMM.DD":"YYYYMM.DD.PATCH",...}}; and, in any component, a
// `rollouts` list (docs/ROLLOUTS.md), which requires that shape (keys `hotfixes`, optional
// then, and `rollouts` only). Errors start with the file name.
StatusOr<ComponentConfig> ParseComponentConfig(std::string_view component, std::string_view json);
Status ValidateComponentConfig(std::string_view component, std::string_view json);

// One pass over a component folder, as the service loads it (DirectoryStore, and the
// `validate`/`plan`/`simulate` tools, which must judge files exactly as the service does).
struct FolderLoad {
  std::map<std::string, std::shared_ptr<const ComponentConfig>> valid;  // by component
  std::set<std::string> refused;                // components whose file was refused
  std::map<std::string, std::string> rejected;  // file name -> why (starts with the file name)
};
// The largest component file read (a ConfigMap's data is at most 1 MiB in all).
inline constexpr size_t kMaxComponentFileBytes = size_t{1} << 20;
// Fails only when the folder cannot be listed.
StatusOr<FolderLoad> LoadComponentFolder(const std::string& dir,
                                         size_t max_file_bytes = kMaxComponentFileBytes);

}  // namespace hotfix::service
