#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "service/store/component_store.h"
#include "temp_dir.h"
#include "wait.h"

namespace hotfix::service {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;  // NOLINT(build/namespaces): literals only
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;
using testsupport::kGenerous;
using testsupport::TempDir;
using testsupport::WaitFor;

// Long enough that a test relying on inotify cannot pass by polling.
constexpr std::chrono::milliseconds kNoPolling = std::chrono::hours(1);

constexpr char kAks[] = "aksNodeController";
constexpr char kAksFile[] = "aksNodeController.json";
constexpr char kAksV1[] = R"({"hotfixes":{"202604.01":"202604.01.1"}})";
constexpr char kAksV2[] = R"({"hotfixes":{"202604.01":"202604.01.2"}})";
constexpr char kAksBad[] = R"({"hotfixes":{"202604.01":"x"}})";

// ---- DirectoryStore ---------------------------------------------------------------------

// Every report on_reload delivered, for tests to wait on.
class Reports {
 public:
  std::function<void(const ReloadReport&)> Callback() {
    return [this](const ReloadReport& r) {
      std::lock_guard<std::mutex> lock(mu_);
      all_.push_back(r);
      cv_.notify_all();
    };
  }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu_);
    return all_.size();
  }
  ReloadReport At(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return all_.at(i);
  }
  // Waits for a report at index >= from that satisfies pred; returns it, or nullopt.
  std::optional<ReloadReport> WaitFor(size_t from,
                                      const std::function<bool(const ReloadReport&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<ReloadReport> found;
    cv_.wait_for(lock, kGenerous, [&] {
      for (size_t i = from; i < all_.size(); ++i) {
        if (pred(all_[i])) {
          found = all_[i];
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ReloadReport> all_;
};

// Writes through a hidden temp file and rename(2), as a careful writer does, so the store
// never reads a half-written file.
void WriteAtomically(const fs::path& path, std::string_view text) {
  AtomicWriteOptions options;
  options.temp_prefix = ".tmp-";
  Status st = WriteFileAtomically(path.string(), text, options);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// Polls the store until pred holds for its snapshot.
bool WaitForSnapshot(const DirectoryStore& store,
                     const std::function<bool(const StoreSnapshot&)>& pred) {
  return WaitFor(
      [&] {
        auto snap = store.Current();
        return snap != nullptr && pred(*snap);
      },
      kGenerous);
}

// component -> file text, for comparing a snapshot as a whole.
std::map<std::string, std::string> Texts(const StoreSnapshot& snap) {
  std::map<std::string, std::string> out;
  for (const auto& [component, config] : snap.components) out.emplace(component, config->text);
  return out;
}

bool HasConfig(const StoreSnapshot& snap, const std::string& component, std::string_view text) {
  auto it = snap.components.find(component);
  return it != snap.components.end() && it->second->text == text;
}

class DirectoryStoreTest : public ::testing::Test {
 protected:
  DirectoryStoreOptions Options(std::chrono::milliseconds poll = kNoPolling) {
    DirectoryStoreOptions options;
    options.dir = dir_.path().string();
    options.debounce = 20ms;
    options.poll_interval = poll;
    options.on_reload = reports_.Callback();
    return options;
  }
  std::unique_ptr<DirectoryStore> StartStore(DirectoryStoreOptions options) {
    auto store = DirectoryStore::Start(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Declared before any store so it outlives the watcher thread that calls into it.
  Reports reports_;
  TempDir dir_{"store-test"};
};

TEST_F(DirectoryStoreTest, InitialLoadTakesValidFilesAndReportsTheRest) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  WriteAtomically(dir_.File("other.json"), R"({"a":1})");
  WriteAtomically(dir_.File("broken.json"), "{");
  WriteAtomically(dir_.File("1bad.json"), "{}");
  WriteAtomically(dir_.File("README.md"), "not a component");
  WriteAtomically(dir_.File("notes.json.bak"), "{}");
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);

  auto snap = store->Current();
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->generation, 1u);
  EXPECT_THAT(Texts(*snap), ElementsAre(Pair(kAks, kAksV1), Pair("other", R"({"a":1})")));
  EXPECT_LE(snap->loaded_at, std::chrono::system_clock::now());

  ASSERT_GE(reports_.Count(), 1u);
  ReloadReport first = reports_.At(0);
  EXPECT_TRUE(first.swapped);
  EXPECT_EQ(first.generation, 1u);
  EXPECT_TRUE(first.error.ok());
  ASSERT_EQ(first.rejected.size(), 2u);
  EXPECT_THAT(first.rejected.at("broken.json"), HasSubstr("broken.json: invalid JSON"));
  EXPECT_EQ(first.rejected.at("1bad.json"), R"(1bad.json: "1bad" is not a valid component name)");
}

TEST_F(DirectoryStoreTest, EmptyFolderIsAnEmptySnapshot) {
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  auto snap = store->Current();
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->generation, 1u);
  EXPECT_THAT(Texts(*snap), IsEmpty());
}

TEST_F(DirectoryStoreTest, MissingFolderFailsStart) {
  DirectoryStoreOptions options = Options();
  options.dir = dir_.File("nope").string();
  auto store = DirectoryStore::Start(options);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(store.status().IsNotFound());
  EXPECT_THAT(store.status().message(), HasSubstr(options.dir));
  EXPECT_THAT(store.status().message(), HasSubstr("No such file or directory"));
  // The failed attempt was still reported.
  ASSERT_EQ(reports_.Count(), 1u);
  EXPECT_FALSE(reports_.At(0).error.ok());
}

TEST_F(DirectoryStoreTest, FileInsteadOfFolderFailsStart) {
  DirectoryStoreOptions options = Options();
  options.dir = dir_.Write("file", "x").string();
  auto store = DirectoryStore::Start(options);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("Not a directory"));
}

TEST_F(DirectoryStoreTest, UnsetFolderOrZeroPollIntervalFailsStart) {
  DirectoryStoreOptions options = Options();
  options.dir.clear();
  EXPECT_EQ(DirectoryStore::Start(options).status().code(), Status::Code::kInvalidArgument);
  options = Options(0ms);
  EXPECT_EQ(DirectoryStore::Start(options).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(DirectoryStoreTest, ReloadsOnRenameOverTheFile) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  WriteAtomically(dir_.File(kAksFile), kAksV2);
  EXPECT_TRUE(WaitForSnapshot(*store, [](const StoreSnapshot& s) {
    return HasConfig(s, kAks, kAksV2) && s.generation == 2;
  }));
}

// Without a watch the store polls every second: an idle store that stays quiet for longer
// proves the inotify watch is in place, so the tests with polling off exercise inotify.
TEST_F(DirectoryStoreTest, WatchedIdleFolderIsNotPolled) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  std::this_thread::sleep_for(2500ms);  // two and a half poll periods
  EXPECT_EQ(reports_.Count(), 1u);
  EXPECT_EQ(store->Current()->generation, 1u);
}

TEST_F(DirectoryStoreTest, ReloadsOnInPlaceWrite) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  dir_.Write(kAksFile, kAksV2);  // truncate and write: IN_MODIFY, IN_CLOSE_WRITE
  EXPECT_TRUE(
      WaitForSnapshot(*store, [](const StoreSnapshot& s) { return HasConfig(s, kAks, kAksV2); }));
}

TEST_F(DirectoryStoreTest, ReloadsOnCreateAndDelete) {
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  WriteAtomically(dir_.File("other.json"), R"({"a":1})");
  ASSERT_TRUE(WaitForSnapshot(
      *store, [](const StoreSnapshot& s) { return HasConfig(s, "other", R"({"a":1})"); }));
  fs::remove(dir_.File("other.json"));
  EXPECT_TRUE(WaitForSnapshot(*store, [](const StoreSnapshot& s) { return Texts(s).empty(); }));
}

TEST_F(DirectoryStoreTest, ReloadsOnMoveIntoAndOutOfTheFolder) {
  TempDir outside("store-outside");
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  // Same file system: TMPDIR holds both.
  WriteAtomically(outside.File("x.json"), R"({"x":1})");
  ASSERT_EQ(::rename(outside.File("x.json").c_str(), dir_.File("x.json").c_str()), 0);
  ASSERT_TRUE(
      WaitForSnapshot(*store, [](const StoreSnapshot& s) { return Texts(s).count("x") == 1; }));
  ASSERT_EQ(::rename(dir_.File("x.json").c_str(), outside.File("x.json").c_str()), 0);
  EXPECT_TRUE(WaitForSnapshot(*store, [](const StoreSnapshot& s) { return Texts(s).empty(); }));
}

TEST_F(DirectoryStoreTest, InvalidFileKeepsLastGoodConfigAndIsReported) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  WriteAtomically(dir_.File("other.json"), R"({"a":1})");
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);

  const size_t before = reports_.Count();
  WriteAtomically(dir_.File(kAksFile), kAksBad);
  WriteAtomically(dir_.File("other.json"), R"({"a":2})");
  auto report = reports_.WaitFor(
      before, [](const ReloadReport& r) { return r.rejected.count(kAksFile) == 1 && r.swapped; });
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->rejected.at(kAksFile),
            R"(aksNodeController.json: hotfixes["202604.01"]: value "x" is not YYYYMM.DD.PATCH)");
  EXPECT_EQ(report->generation, 2u);
  auto snap = store->Current();
  EXPECT_EQ(snap->generation, 2u);
  // The other component moved on; the refused one kept its last good config.
  EXPECT_THAT(Texts(*snap), ElementsAre(Pair(kAks, kAksV1), Pair("other", R"({"a":2})")));

  // Fixing the file brings the new config in, and the complaint stops.
  const size_t fixed_from = reports_.Count();
  WriteAtomically(dir_.File(kAksFile), kAksV2);
  auto fixed = reports_.WaitFor(fixed_from, [](const ReloadReport& r) { return r.swapped; });
  ASSERT_TRUE(fixed.has_value());
  EXPECT_THAT(fixed->rejected, IsEmpty());
  EXPECT_TRUE(HasConfig(*store->Current(), kAks, kAksV2));
}

TEST_F(DirectoryStoreTest, RejectedFileStillReportsWithoutASwap) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  WriteAtomically(dir_.File(kAksFile), kAksBad);
  ASSERT_TRUE(
      reports_.WaitFor(0, [](const ReloadReport& r) { return r.rejected.count(kAksFile) == 1; })
          .has_value());
  // Nothing served changed: the same generation, no swap, and the file is still named.
  ReloadReport again = store->Reload();
  EXPECT_FALSE(again.swapped);
  EXPECT_EQ(again.generation, 1u);
  EXPECT_TRUE(again.rejected.count(kAksFile) == 1);
  EXPECT_EQ(store->Current()->generation, 1u);
  EXPECT_TRUE(HasConfig(*store->Current(), kAks, kAksV1));
}

TEST_F(DirectoryStoreTest, BrandNewInvalidFileIsAbsentAndReported) {
  WriteAtomically(dir_.File("other.json"), R"({"a":1})");
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  const size_t before = reports_.Count();
  WriteAtomically(dir_.File(kAksFile), kAksBad);
  auto report = reports_.WaitFor(
      before, [](const ReloadReport& r) { return r.rejected.count(kAksFile) == 1; });
  ASSERT_TRUE(report.has_value());
  EXPECT_FALSE(report->swapped);
  EXPECT_EQ(store->Current()->generation, 1u);
  EXPECT_THAT(Texts(*store->Current()), ElementsAre(Pair("other", R"({"a":1})")));
}

TEST_F(DirectoryStoreTest, HiddenEntriesAreIgnored) {
  WriteAtomically(dir_.File(".secret.json"), R"({"a":1})");
  WriteAtomically(dir_.File(".broken.json"), "{");
  fs::create_directory(dir_.File(".hidden-dir"));
  WriteAtomically(dir_.File(".hidden-dir/inner.json"), R"({"a":1})");
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(Texts(*store->Current()), IsEmpty());
  ASSERT_GE(reports_.Count(), 1u);
  EXPECT_THAT(reports_.At(0).rejected, IsEmpty());
}

TEST_F(DirectoryStoreTest, OversizedFileIsRejected) {
  const std::string big = R"({"pad":")" + std::string(200, 'p') + "\"}";
  ASSERT_TRUE(ValidateComponentConfig("big", big).ok());
  WriteAtomically(dir_.File("big.json"), big);
  WriteAtomically(dir_.File("small.json"), R"({"a":1})");
  DirectoryStoreOptions options = Options();
  options.max_file_bytes = 100;
  auto store = StartStore(options);
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(Texts(*store->Current()), ElementsAre(Pair("small", R"({"a":1})")));
  ASSERT_GE(reports_.Count(), 1u);
  ASSERT_EQ(reports_.At(0).rejected.count("big.json"), 1u);
  EXPECT_THAT(reports_.At(0).rejected.at("big.json"), HasSubstr("larger than 100 bytes"));
}

TEST_F(DirectoryStoreTest, NonRegularFileIsRejected) {
  fs::create_directory(dir_.File("dir.json"));
  ASSERT_EQ(::mkfifo(dir_.File("fifo.json").c_str(), 0600), 0);
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(Texts(*store->Current()), IsEmpty());
  ReloadReport first = reports_.At(0);
  ASSERT_EQ(first.rejected.size(), 2u);
  EXPECT_THAT(first.rejected.at("dir.json"), HasSubstr("not a regular file"));
  EXPECT_THAT(first.rejected.at("fifo.json"), HasSubstr("not a regular file"));
}

TEST_F(DirectoryStoreTest, GenerationIncrementsOnlyOnChange) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);

  ReloadReport same = store->Reload();
  EXPECT_FALSE(same.swapped);
  EXPECT_EQ(same.generation, 1u);
  auto gen1 = store->Current();

  // Rewriting identical content wakes the watcher but swaps nothing.
  size_t before = reports_.Count();
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  auto quiet = reports_.WaitFor(before, [](const ReloadReport&) { return true; });
  ASSERT_TRUE(quiet.has_value());
  EXPECT_FALSE(quiet->swapped);
  EXPECT_EQ(quiet->generation, 1u);
  EXPECT_EQ(store->Current(), gen1);  // the very same snapshot object

  before = reports_.Count();
  WriteAtomically(dir_.File(kAksFile), kAksV2);
  auto changed = reports_.WaitFor(before, [](const ReloadReport& r) { return r.swapped; });
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(changed->generation, 2u);
  EXPECT_EQ(store->Current()->generation, 2u);
  EXPECT_EQ(gen1->generation, 1u);  // a held snapshot never changes under its reader
  EXPECT_TRUE(HasConfig(*gen1, kAks, kAksV1));
}

// The layout the kubelet writes for a ConfigMap volume, and its atomic update.
class ConfigMapVolume {
 public:
  explicit ConfigMapVolume(const fs::path& dir) : dir_(dir) {}

  // Writes a new timestamped folder with files, then points ..data at it by renaming a new
  // symlink over the old one; user-visible symlinks are added or removed afterwards, as the
  // kubelet does.
  void Publish(const std::map<std::string, std::string>& files) {
    const std::string stamp = "..2026_12_02_15_00_0" + std::to_string(++version_) + ".123456789";
    fs::create_directory(dir_ / stamp);
    for (const auto& [name, text] : files) WriteAtomically(dir_ / stamp / name, text);
    fs::create_directory_symlink(stamp, dir_ / "..data_tmp");
    ASSERT_EQ(::rename((dir_ / "..data_tmp").c_str(), (dir_ / "..data").c_str()), 0);
    for (const auto& [name, text] : files) {
      if (!fs::is_symlink(dir_ / name)) fs::create_symlink("..data/" + name, dir_ / name);
    }
    for (const std::string& name : names_) {
      if (files.count(name) == 0) fs::remove(dir_ / name);
    }
    if (!current_.empty()) fs::remove_all(dir_ / current_);
    current_ = stamp;
    names_.clear();
    for (const auto& [name, text] : files) names_.push_back(name);
  }
  fs::path CurrentFile(const std::string& name) const { return dir_ / current_ / name; }

 private:
  fs::path dir_;
  int version_ = 0;
  std::string current_;
  std::vector<std::string> names_;
};

TEST_F(DirectoryStoreTest, FollowsTheConfigMapSymlinkSwap) {
  ConfigMapVolume volume(dir_.path());
  volume.Publish({{kAksFile, kAksV1}, {"other.json", R"({"a":1})"}});
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(Texts(*store->Current()),
              ElementsAre(Pair(kAks, kAksV1), Pair("other", R"({"a":1})")));

  volume.Publish({{kAksFile, kAksV2}});
  EXPECT_TRUE(WaitForSnapshot(*store, [](const StoreSnapshot& s) {
    return Texts(s).size() == 1 && HasConfig(s, kAks, kAksV2);
  }));

  // A bad update keeps the last good config, as for a plain file.
  const size_t before = reports_.Count();
  volume.Publish({{kAksFile, kAksBad}, {"new.json", R"({"n":1})"}});
  ASSERT_TRUE(
      WaitForSnapshot(*store, [](const StoreSnapshot& s) { return Texts(s).count("new") == 1; }));
  EXPECT_TRUE(HasConfig(*store->Current(), kAks, kAksV2));
  EXPECT_TRUE(
      reports_
          .WaitFor(before, [](const ReloadReport& r) { return r.rejected.count(kAksFile) == 1; })
          .has_value());
}

TEST_F(DirectoryStoreTest, PollingCatchesWhatInotifyCannotSee) {
  ConfigMapVolume volume(dir_.path());
  volume.Publish({{kAksFile, kAksV1}});
  auto store = StartStore(Options(/*poll=*/200ms));
  ASSERT_NE(store, nullptr);
  // A write inside the timestamped folder raises no event on the watched folder.
  WriteAtomically(volume.CurrentFile(kAksFile), kAksV2);
  EXPECT_TRUE(
      WaitForSnapshot(*store, [](const StoreSnapshot& s) { return HasConfig(s, kAks, kAksV2); }));
}

TEST_F(DirectoryStoreTest, SurvivesTheFolderVanishingAndComingBack) {
  const fs::path dir = dir_.File("volume");
  fs::create_directory(dir);
  WriteAtomically(dir / kAksFile, kAksV1);
  DirectoryStoreOptions options = Options();
  options.dir = dir.string();
  auto store = StartStore(options);
  ASSERT_NE(store, nullptr);

  const size_t before = reports_.Count();
  fs::remove_all(dir);
  auto failed = reports_.WaitFor(before, [](const ReloadReport& r) { return !r.error.ok(); });
  ASSERT_TRUE(failed.has_value());
  EXPECT_THAT(failed->error.message(), HasSubstr("No such file or directory"));
  // Still serving the last snapshot.
  EXPECT_TRUE(HasConfig(*store->Current(), kAks, kAksV1));

  // Recreated: the store watches the new folder (polling meanwhile, even with a long
  // poll interval) and picks up its content.
  fs::create_directory(dir);
  WriteAtomically(dir / kAksFile, kAksV2);
  ASSERT_TRUE(
      WaitForSnapshot(*store, [](const StoreSnapshot& s) { return HasConfig(s, kAks, kAksV2); }));
  // And the new watch works: a further change arrives too.
  WriteAtomically(dir / "other.json", R"({"a":1})");
  EXPECT_TRUE(WaitForSnapshot(
      *store, [](const StoreSnapshot& s) { return HasConfig(s, "other", R"({"a":1})"); }));
}

TEST_F(DirectoryStoreTest, DestructorReturnsPromptly) {
  DirectoryStoreOptions options = Options();
  options.debounce = std::chrono::hours(1);  // a reload is pending when we stop
  std::promise<void> seen;
  std::atomic<bool> said{false};
  options.on_change_seen = [&] {
    if (!said.exchange(true)) seen.set_value();
  };
  auto store = StartStore(options);
  ASSERT_NE(store, nullptr);
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  // The watcher has seen the change and waits out the hour.
  ASSERT_EQ(seen.get_future().wait_for(kGenerous), std::future_status::ready);
  const auto start = std::chrono::steady_clock::now();
  store.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kGenerous);  // not the hour's debounce
}

TEST_F(DirectoryStoreTest, CurrentIsSafeWhileReloading) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  auto store = StartStore(Options(/*poll=*/10ms));
  ASSERT_NE(store, nullptr);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      WriteAtomically(dir_.File(kAksFile), i % 2 ? kAksV1 : kAksV2);
      std::this_thread::sleep_for(1ms);
    }
  });
  // Each snapshot a reader holds is whole: one of the two versions, never a mix; ASan
  // catches a snapshot freed under its reader. Reads go on until swaps have happened under
  // them, whatever the machine's speed.
  bool whole = true;
  uint64_t generation = 0;
  const auto end = std::chrono::steady_clock::now() + kGenerous;
  while (generation < 3 && std::chrono::steady_clock::now() < end) {
    auto snap = store->Current();
    whole = whole && snap != nullptr &&
            (HasConfig(*snap, kAks, kAksV1) || HasConfig(*snap, kAks, kAksV2));
    if (snap != nullptr) generation = snap->generation;
  }
  EXPECT_GE(generation, 3u);
  stop = true;
  writer.join();
  EXPECT_TRUE(whole);
}

// Found by ThreadSanitizer: with std::atomic<std::shared_ptr> (libstdc++ 12), a reload's store
// raced the calls' loads. Readers on other threads while reloads swap snapshots; under
// -DHOTFIX_TSAN=ON any race fails the run, elsewhere every read must see a whole snapshot.
TEST_F(DirectoryStoreTest, CallsReadWhileReloadsSwap) {
  WriteAtomically(dir_.File(kAksFile), kAksV1);
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::atomic<int> reading{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      ++reading;
      while (!stop) {
        auto snap = store->Current();
        if (snap == nullptr || !(HasConfig(*snap, kAks, kAksV1) || HasConfig(*snap, kAks, kAksV2)))
          ++torn;
      }
    });
  }
  while (reading < 2) std::this_thread::yield();  // the swaps happen under both readers
  for (int i = 0; i < 20; ++i) {
    WriteAtomically(dir_.File(kAksFile), i % 2 ? kAksV1 : kAksV2);
    store->Reload();
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(torn, 0);
  EXPECT_TRUE(HasConfig(*store->Current(), kAks, kAksV1));
}

}  // namespace
}  // namespace hotfix::service
