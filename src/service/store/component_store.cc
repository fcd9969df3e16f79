#include "service/store/component_store.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/log.h"

namespace hotfix::service {
namespace {

using Clock = std::chrono::steady_clock;

// Without a working watch, polling is the only way to see a change: keep it close to the
// two-second promise.
constexpr std::chrono::milliseconds kUnwatchedPollInterval{1000};

using ComponentMap = std::map<std::string, std::shared_ptr<const ComponentConfig>>;

// Whether two loads found the same files: only then is the generation kept.
bool SameTexts(const ComponentMap& a, const ComponentMap& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.first == y.first && x.second->text == y.second->text;
  });
}

}  // namespace

struct DirectoryStore::Impl {
  explicit Impl(DirectoryStoreOptions opts) : options(std::move(opts)) {}
  ~Impl();

  ReloadReport Reload();
  Status OpenFds();
  void Rewatch();
  void WatchLoop();
  bool DrainEvents();
  std::chrono::milliseconds PollInterval() const;

  const DirectoryStoreOptions options;
  // Not std::atomic<std::shared_ptr>: libstdc++ 12's load() releases its internal lock with a
  // relaxed store, so a store() racing a load() is a data race (ThreadSanitizer reports it).
  // Holding current_mu only to copy the pointer costs an uncontended lock per call.
  std::shared_ptr<const StoreSnapshot> Current() const {
    std::lock_guard<std::mutex> lock(current_mu);
    return current;
  }
  void SetCurrent(std::shared_ptr<const StoreSnapshot> next) {
    std::lock_guard<std::mutex> lock(current_mu);
    current = std::move(next);
  }
  mutable std::mutex current_mu;
  std::shared_ptr<const StoreSnapshot> current;  // guarded by current_mu
  std::mutex reload_mu;  // one reload at a time: the watcher's and Reload()'s callers'
  int inotify_fd = -1;
  int watch = -1;    // the folder's watch descriptor, -1 while there is none
  int wake_fd = -1;  // eventfd: the destructor's "stop now"
  bool warned_unwatched = false;
  bool complete = false;  // guarded by reload_mu: ReloadReport::complete
  std::thread watcher;
};

DirectoryStore::Impl::~Impl() {
  if (watcher.joinable()) {
    const uint64_t one = 1;
    // An eventfd write of 1 cannot fail short of overflow; poll() sees it at once.
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
    watcher.join();
  }
  if (inotify_fd >= 0) ::close(inotify_fd);
  if (wake_fd >= 0) ::close(wake_fd);
}

ReloadReport DirectoryStore::Impl::Reload() {
  std::lock_guard<std::mutex> lock(reload_mu);
  ReloadReport report;
  std::shared_ptr<const StoreSnapshot> old = Current();
  report.generation = old ? old->generation : 0;
  StatusOr<FolderLoad> scan = LoadComponentFolder(options.dir, options.max_file_bytes);
  if (!scan.ok()) {
    // Keep serving what we have: a vanished or unreadable folder is an operator's problem
    // to fix, not a reason to answer every node "no hotfixes".
    report.error = scan.status();
  } else {
    auto components = std::move(scan->valid);
    for (const std::string& component : scan->refused) {
      if (!old) break;
      auto last_good = old->components.find(component);
      if (last_good != old->components.end()) components.insert(*last_good);
    }
    report.rejected = std::move(scan->rejected);
    if (report.rejected.empty()) complete = true;
    if (!old || !SameTexts(old->components, components)) {
      auto next = std::make_shared<StoreSnapshot>();
      next->generation = ++report.generation;
      next->components = std::move(components);
      next->loaded_at = std::chrono::system_clock::now();
      SetCurrent(std::move(next));
      report.swapped = true;
    }
  }
  report.complete = complete;
  if (options.on_reload) options.on_reload(report);
  return report;
}

std::chrono::milliseconds DirectoryStore::Impl::PollInterval() const {
  if (watch >= 0) return options.poll_interval;
  return std::min(options.poll_interval, kUnwatchedPollInterval);
}

Status DirectoryStore::Impl::OpenFds() {
  wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return Status::FromErrno("eventfd", errno);
  inotify_fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_fd < 0 && options.log != nullptr) {
    // Often the per-user instance limit on a busy node: degrade to polling, do not fail.
    options.log->Warn("component store: inotify unavailable, polling the folder",
                      {{"dir", options.dir}, {"error", Status::FromErrno("inotify", errno)}});
  }
  return Status::Ok();
}

// (Re)places the watch on whatever options.dir names now. The folder may have been
// deleted, recreated or, through a symlink, replaced; adding the same inode again returns
// the same descriptor, so this is cheap to call before every reload.
void DirectoryStore::Impl::Rewatch() {
  if (inotify_fd < 0) return;
  constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE |
                             IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
  const int next = ::inotify_add_watch(inotify_fd, options.dir.c_str(), kMask);
  const int err = errno;
  if (watch >= 0 && watch != next) ::inotify_rm_watch(inotify_fd, watch);
  watch = next;
  // A missing folder is reported by the reload; anything else (the per-user watch limit)
  // only here, once until a watch succeeds again.
  if (next >= 0 || err == ENOENT) {
    warned_unwatched = false;
  } else if (!warned_unwatched && options.log != nullptr) {
    warned_unwatched = true;
    options.log->Warn("component store: cannot watch the folder, polling it",
                      {{"dir", options.dir}, {"error", Status::FromErrno("inotify", err)}});
  }
}

// Reads every queued event. Returns whether any arrived. An event that says the watch is
// gone (folder deleted or moved) drops it, so polling speeds up until Rewatch() succeeds.
bool DirectoryStore::Impl::DrainEvents() {
  alignas(struct inotify_event) char buf[8192];
  bool any = false;
  for (;;) {
    ssize_t n = ::read(inotify_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return any;
    any = true;
    for (ssize_t off = 0; off < n;) {
      const auto* event = reinterpret_cast<const struct inotify_event*>(buf + off);
      if (event->wd == watch && (event->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))) {
        ::inotify_rm_watch(inotify_fd, watch);
        watch = -1;
      }
      off += static_cast<ssize_t>(sizeof(struct inotify_event) + event->len);
    }
  }
}

// Reloads debounce after the first event of a burst (a burst cannot postpone the reload
// forever) and every poll interval regardless.
void DirectoryStore::Impl::WatchLoop() {
  auto next_poll = Clock::now() + PollInterval();
  std::optional<Clock::time_point> reload_at;
  for (;;) {
    const Clock::time_point wake = reload_at ? std::min(*reload_at, next_poll) : next_poll;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now());
    const int timeout_ms = static_cast<int>(std::max<int64_t>(wait.count(), 0));
    struct pollfd fds[2] = {{wake_fd, POLLIN, 0}, {inotify_fd, POLLIN, 0}};
    // A negative fd (no inotify) is ignored by poll(2).
    if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
      // Nothing sensible to do but keep polling on the timer; avoid a hot loop.
      ::usleep(100000);
    }
    if (fds[0].revents != 0) return;
    if ((fds[1].revents & POLLIN) && DrainEvents() && !reload_at) {
      reload_at = Clock::now() + options.debounce;
      if (options.on_change_seen) options.on_change_seen();
    }
    const Clock::time_point now = Clock::now();
    if ((reload_at && now >= *reload_at) || now >= next_poll) {
      reload_at.reset();
      Rewatch();  // before reading, so a change made during the reload is not missed
      Reload();
      next_poll = Clock::now() + PollInterval();
    }
  }
}

StatusOr<std::unique_ptr<DirectoryStore>> DirectoryStore::Start(DirectoryStoreOptions options) {
  if (options.poll_interval <= std::chrono::milliseconds::zero()) {
    return Status::InvalidArgument("component store: poll_interval must be positive");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  Status st = impl->OpenFds();
  if (!st.ok()) return st.Annotate("component store");
  impl->Rewatch();  // before the first scan, so a change made during it is seen
  ReloadReport first = impl->Reload();
  if (!first.error.ok()) return first.error;
  impl->watcher = std::thread(&Impl::WatchLoop, impl.get());
  return std::unique_ptr<DirectoryStore>(new DirectoryStore(std::move(impl)));
}

DirectoryStore::DirectoryStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DirectoryStore::~DirectoryStore() = default;

std::shared_ptr<const StoreSnapshot> DirectoryStore::Current() const { return impl_->Current(); }

ReloadReport DirectoryStore::Reload() { return impl_->Reload(); }

}  // namespace hotfix::service
