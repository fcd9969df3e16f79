// The component store: one file per component, `<component>.json`, in a folder (a Kubernetes
// ConfigMap volume in production). Every file is validated; a snapshot of all of them is
// swapped in whole, so a call sees one generation, never a mix.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "service/rollout/rollout.h"

namespace hotfix {
class Logger;
}  // namespace hotfix

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

struct StoreSnapshot {
  uint64_t generation = 0;  // 1 for the first load, +1 per swap
  std::map<std::string, std::shared_ptr<const ComponentConfig>> components;
  std::chrono::system_clock::time_point loaded_at;
};

// What a (re)load found, for logs and metrics.
struct ReloadReport {
  bool swapped = false;                         // a new snapshot is current
  uint64_t generation = 0;                      // the current generation after this reload
  std::map<std::string, std::string> rejected;  // file name -> why it was refused
  Status error;                                 // the reload as a whole failed (folder unreadable)
};

class ComponentStore {
 public:
  virtual ~ComponentStore() = default;
  // nullptr until the first successful load: callers answer UNAVAILABLE.
  virtual std::shared_ptr<const StoreSnapshot> Current() const = 0;
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
// Fails only when the folder cannot be listed.
StatusOr<FolderLoad> LoadComponentFolder(const std::string& dir, size_t max_file_bytes = 1 << 20);

struct DirectoryStoreOptions {
  std::string dir;
  size_t max_file_bytes = 1 << 20;
  // Changes are coalesced for this long before a reload.
  std::chrono::milliseconds debounce{200};
  // The folder is also re-read this often: inotify misses changes on some volume types and
  // writes made below a symlinked subfolder. While no inotify watch is in place (inotify
  // unavailable, folder deleted) the store polls at least every second. Must be positive.
  std::chrono::milliseconds poll_interval{5000};
  // Called after every reload attempt (initial load included), on the thread that reloads:
  // Start's caller for the first, the watcher thread (or Reload's caller) after. Calls are
  // serialised; the callback must not call Reload().
  std::function<void(const ReloadReport&)> on_reload;
  // Called on the watcher thread when it has seen the first change of a burst and waits out
  // the debounce: for tests that must know the watcher is waiting. May be empty.
  std::function<void()> on_change_seen;
  // Warnings no report carries (inotify unavailable); nullptr discards them.
  Logger* log = nullptr;
};

// Loads dir now and reloads it when it changes (inotify on the folder, following the
// `..data` symlink swap of ConfigMap volumes). A file that fails validation is left out of
// the new snapshot and reported; the components it held keep their last good config. Start
// fails when dir cannot be read.
class DirectoryStore : public ComponentStore {
 public:
  static StatusOr<std::unique_ptr<DirectoryStore>> Start(DirectoryStoreOptions options);
  ~DirectoryStore() override;
  std::shared_ptr<const StoreSnapshot> Current() const override;
  // Reloads synchronously (also what the watcher calls).
  ReloadReport Reload();

 private:
  struct Impl;
  explicit DirectoryStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hotfix::service
