// The component store: the folder of component files (component_file.h; a Kubernetes ConfigMap
// volume in production), loaded and reloaded when it changes. Every file is validated; a
// snapshot of all of them is swapped in whole, so a call sees one generation, never a mix.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "service/store/component_file.h"

namespace hotfix {
class Logger;
}  // namespace hotfix

namespace hotfix::service {

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
  // A load since the store started refused no file and read the folder: every file is served
  // as the folder has it. Until then the replica is not Ready (docs/OPERATIONS.md, "Ready
  // means serving"); once true it stays true, a later refused file keeping its last good text.
  bool complete = false;
};

class ComponentStore {
 public:
  virtual ~ComponentStore() = default;
  // nullptr until the first successful load: callers answer UNAVAILABLE.
  virtual std::shared_ptr<const StoreSnapshot> Current() const = 0;
};

struct DirectoryStoreOptions {
  std::string dir;
  size_t max_file_bytes = kMaxComponentFileBytes;
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
