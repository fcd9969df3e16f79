// Which verified subscriptions may call (PERMISSION_DENIED for the rest): fixed from
// --allowed-subscriptions, or read from --allowed-subscriptions-file and read again when the
// file changes (a ConfigMap edit reaches the pods within about a minute), so a subscription
// added to the fleet is served without restarting anything. A changed file that does not load
// is logged, counted in last_reload_successful() and ignored: the list before it stays.
//
//   auto list = SubscriptionAllowList::Load(path);       // refuses with a Status
//   if (!(*list)->Allows(identity.subscription_id)) ...  // any thread
//   (*list)->ReloadIfChanged(&log);                      // every --refresh-interval
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_util.h"
#include "common/log.h"
#include "common/status.h"

namespace hotfix::service {

inline constexpr size_t kMaxAllowListBytes = 1 << 20;
inline constexpr size_t kMaxAllowListEntries = 100000;

class SubscriptionAllowList {
 public:
  // The flag's list, fixed; empty: any verified subscription may call.
  static std::unique_ptr<SubscriptionAllowList> Fixed(const std::vector<std::string>& ids);
  // The file's list. InvalidArgument naming --allowed-subscriptions-file when it does not load.
  static StatusOr<std::unique_ptr<SubscriptionAllowList>> Load(std::string path);

  // The file's text: subscription IDs (GUIDs, any case) separated by commas, spaces or lines;
  // `#` starts a comment to the end of its line. At least one ID: an empty or half-written
  // file never opens the service to every subscription. Lower-cased. Written by hand: a list
  // of GUIDs is below what a parsing library is for.
  static StatusOr<std::set<std::string>> Parse(std::string_view text);

  bool Allows(std::string_view subscription) const;
  // Re-reads the file if its inode, size or modification time changed; logs what it did.
  void ReloadIfChanged(Logger* log);

  bool from_file() const { return !path_.empty(); }
  // Subscriptions listed now (0: any may call).
  size_t size() const { return size_.load(std::memory_order_relaxed); }
  // False after a changed file failed to load, until one loads.
  bool last_reload_successful() const { return reload_ok_.load(std::memory_order_relaxed); }

 private:
  explicit SubscriptionAllowList(std::string path) : path_(std::move(path)) {}
  Status Build();  // reads the file and installs its list
  void Install(std::set<std::string> ids);

  const std::string path_;  // empty: Fixed
  FileStamp stamp_;         // of the file last tried; only ReloadIfChanged's thread
  mutable std::mutex mu_;
  std::shared_ptr<const std::set<std::string>> ids_;  // guarded by mu_; empty: any
  std::atomic<size_t> size_{0};
  std::atomic<bool> reload_ok_{true};
};

}  // namespace hotfix::service
