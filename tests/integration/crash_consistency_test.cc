// Crash consistency (issue 5): the real hotfix-agent binaries are killed with SIGKILL at random
// moments, and strace injects a SIGKILL or an EIO at each system call of their runs. After every
// interrupted run, each file the command replaces (the pointer, the staged binary, the
// write_files targets) must be byte for byte its old or its new content with that content's
// mode, never empty or partial; and a later clean run must leave no `.aks-node-controller-*`
// temp file behind and the new content in place.
//
// Scenarios: check-hotfix through the real stack (HAProxy, FakeLpsServer, IMDS stand-in),
// download-hotfix installing a binary with apt stand-ins first on PATH, and download-hotfix
// applying a scripts hotfix (write_files of nodecustomdata.yml).
//
// Sizes (environment):
//   (default)         CI: CRASH_KILLS=24 random kills in all; strace enumerates every call of
//                     the staging sequence (folder lock to lock release) with SIGKILL and EIO
//   CRASH_FULL=1      1,000 random kills, and strace enumerates every occurrence of each
//                     syscall after main() starts (scripts/reliability.sh)
//   CRASH_KILLS=N     overrides the number of random kills (split over the three scenarios)
//   CRASH_SEED=S      replays a run (the seed is printed either way)
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bin_dir.h"
#include "check_hotfix_run.h"
#include "common/base64.h"
#include "imds_standin.h"
#include "proxied_lps.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "text_util.h"

namespace hotfix::testsupport {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Generous: a run takes well under a second, strace and a loaded machine included.
constexpr auto kRunTimeout = 60s;
constexpr char kTempMarker[] = ".aks-node-controller-";
// download-hotfix's run lock lives next to the binary by design and is never removed.
constexpr char kRunLockName[] = ".aks-node-controller-download-hotfix.lock";
// The system calls of the staging sequence (and of reading what it replaces).
const std::vector<std::string> kStagingSyscalls = {"openat", "write",      "fchmod", "fchown",
                                                   "fsync",  "close",      "rename", "flock",
                                                   "unlink", "getdents64", "mkdir"};

std::optional<long> EnvNumber(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::strtol(v, nullptr, 10);
}

bool FullRun() { return EnvNumber("CRASH_FULL").value_or(0) != 0; }

// Random kills per scenario: the total is split over the three.
int KillsPerScenario() {
  long total = EnvNumber("CRASH_KILLS").value_or(FullRun() ? 1000 : 24);
  return static_cast<int>((total + 2) / 3);
}

uint64_t Seed() {
  static const uint64_t seed = [] {
    if (auto s = EnvNumber("CRASH_SEED")) return static_cast<uint64_t>(*s);
    return static_cast<uint64_t>(std::random_device{}()) << 16 ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

void WriteAll(const fs::path& p, const std::string& data, mode_t mode) {
  fs::remove(p);
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << data;
  }
  ::chmod(p.c_str(), mode);
}

// Deterministic filler, so that a partial copy is detectable anywhere in the file.
std::string Filler(size_t size, uint32_t salt) {
  std::mt19937 gen(salt);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(gen());
  return out;
}

// A file the command replaces and the two states it may be found in.
struct Target {
  fs::path path;
  std::optional<std::string> old_content;  // nullopt: absent before the run
  mode_t old_mode = 0;
  std::string new_content;
  mode_t new_mode = 0;
};

enum class Found { kOld, kNew };

// How many targets the run changed (targets it must leave alone are always found new).
long ChangedFound(const std::vector<Found>& found, const std::vector<Target>& targets) {
  long n = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i] == Found::kNew && targets[i].old_content != targets[i].new_content) ++n;
  }
  return n;
}
long Changing(const std::vector<Target>& targets) {
  return std::count_if(targets.begin(), targets.end(),
                       [](const Target& t) { return t.old_content != t.new_content; });
}

struct Tally {
  int runs = 0;
  int exited_before_kill = 0;
  int found_old = 0;
  int found_old_with_temp = 0;
  int found_new = 0;
  int found_mixed = 0;  // write_files: some files new, the rest old (each file whole)
  int temp_files_left = 0;
  int temp_files_cleaned = 0;
  int clean_runs = 0;
  std::string Summary() const {
    std::ostringstream s;
    s << runs << " runs: " << exited_before_kill << " finished before the kill, " << found_old
      << " found old (killed before staging), " << found_old_with_temp
      << " found old with a temp file (killed during staging), " << found_new
      << " found new (killed after the rename)";
    if (found_mixed > 0) s << ", " << found_mixed << " found some files new (between files)";
    // A later run removes a killed run's temp file, killed or not; the clean runs find the
    // rest, and the last of them none.
    s << "; " << temp_files_left << " temp files left by kills, all removed by later runs ("
      << temp_files_cleaned << " by the " << clean_runs << " clean runs), none left";
    return s.str();
  }
};

// What one run reported: the outcome word of its event (empty if it wrote none) and the text.
struct Reported {
  std::string outcome;
  std::string message;
};

class Scenario {
 public:
  virtual ~Scenario() = default;
  virtual std::string Name() const = 0;
  virtual SpawnOptions Spawn() const = 0;
  // Folders whose `.aks-node-controller-*` temp files the command owns.
  virtual std::vector<fs::path> WatchedDirs() const = 0;
  virtual std::string TempPrefix() const = 0;
  const std::vector<Target>& Targets() const { return targets_; }
  // Where the command's events go (cleared by Reset).
  virtual fs::path EventsDir() const = 0;
  // The scratch folder holding every file the command touches.
  virtual fs::path Root() const = 0;
  // Asserts the documented exit code and outcome of a run that was not killed (a clean one or
  // one with an injected error), given what it left. in_window: the error hit the staging
  // sequence itself, where the documented codes are exact.
  virtual void ExpectExit(const ExitStatus& status, const Reported& reported,
                          const std::vector<Found>& found, bool in_window) const = 0;
  // A third state the docs allow after an error (never after a kill), e.g. a pointer whose
  // old copy could not be read: carried nothing over.
  virtual bool DocumentedOther(const Target&, const std::string&) const { return false; }

  // Restores every target's old state; temp files stay (a clean run must remove them).
  void Reset() const {
    for (const Target& t : Targets()) {
      if (t.old_content) {
        WriteAll(t.path, *t.old_content, t.old_mode);
      } else {
        fs::remove(t.path);
      }
    }
    fs::remove_all(EventsDir());
    fs::create_directories(EventsDir());
  }

  std::vector<fs::path> TempFiles() const {
    std::vector<fs::path> out;
    for (const fs::path& dir : WatchedDirs()) {
      for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename();
        if (name.rfind(kTempMarker, 0) == 0 && name != kRunLockName) out.push_back(e.path());
      }
    }
    return out;
  }

  // Leaves exactly one stale temp file (a killed predecessor's), so that the run's sequence
  // includes its removal (getdents64, unlink) and every run starts from the same state.
  void ResetWithOneStaleTemp() const {
    Reset();
    for (const fs::path& p : TempFiles()) fs::remove(p);
    WriteAll(WatchedDirs().front() / (TempPrefix() + "stale0"), "half a file", 0600);
  }

  // The old content and a stale temp file, keeping whatever earlier injected runs left (only
  // the number of unlink calls depends on them): the next clean run must remove all of them.
  void ResetForInjection() const {
    Reset();
    const std::string stale = TempPrefix();
    for (const fs::path& p : TempFiles()) {
      if (p.parent_path() == WatchedDirs().front() && p.filename().string().rfind(stale, 0) == 0) {
        return;
      }
    }
    WriteAll(WatchedDirs().front() / (TempPrefix() + "stale0"), "half a file", 0600);
  }

  Reported ReadReported() const {
    Reported r;
    if (!fs::exists(EventsDir())) return r;
    for (const auto& e : fs::directory_iterator(EventsDir())) {
      if (e.path().extension() != ".json") continue;
      Json event = Json::parse(ReadFile(e.path()), nullptr, false);
      if (event.is_discarded() || !event.contains("Message")) continue;
      r.message = event["Message"].get<std::string>();
      static const std::regex kOutcome("outcome=([A-Za-z]+)");
      std::smatch m;
      if (std::regex_search(r.message, m, kOutcome)) r.outcome = m[1];
    }
    return r;
  }

  // Each target's state; a failed assertion names the file and what was found.
  std::vector<Found> Inspect(const std::string& context, bool allow_documented_other = false,
                             int* documented_other = nullptr) const {
    std::vector<Found> found;
    for (const Target& t : Targets()) {
      struct stat st {};
      const bool exists = ::stat(t.path.c_str(), &st) == 0;
      const std::string content = exists ? ReadFile(t.path) : std::string();
      const mode_t mode = st.st_mode & 07777;
      if (exists && content == t.new_content) {
        EXPECT_EQ(mode, t.new_mode)
            << context << ": " << t.path << " new content, mode " << std::oct << mode;
        found.push_back(Found::kNew);
      } else if (!t.old_content && !exists) {
        found.push_back(Found::kOld);
      } else if (t.old_content && exists && content == *t.old_content) {
        EXPECT_EQ(mode, t.old_mode)
            << context << ": " << t.path << " old content, mode " << std::oct << mode;
        found.push_back(Found::kOld);
      } else if (allow_documented_other && exists && DocumentedOther(t, content)) {
        if (documented_other != nullptr) ++*documented_other;
        found.push_back(Found::kNew);
      } else {
        ADD_FAILURE() << context << ": " << t.path << " is neither old nor new: "
                      << (exists ? std::to_string(content.size()) + " bytes, starting \"" +
                                       content.substr(0, 80) + "\""
                                 : std::string("absent"));
        found.push_back(Found::kOld);
      }
    }
    return found;
  }

  // A clean run after interrupted ones: success, the new content, and no temp file left.
  void CleanRun(const std::string& context, Tally& tally) const {
    const size_t before = TempFiles().size();
    fs::remove_all(EventsDir());
    fs::create_directories(EventsDir());
    RunResult run = RunProcess(Spawn(), kRunTimeout);
    ++tally.clean_runs;
    std::vector<Found> found = Inspect(context + ", clean run");
    ExpectExit(run.status, ReadReported(), found, true);
    for (Found f : found) EXPECT_EQ(f, Found::kNew) << context << ": clean run left old content";
    const std::vector<fs::path> left = TempFiles();
    EXPECT_TRUE(left.empty()) << context << ": a clean run left " << left.size()
                              << " temp files, e.g. " << (left.empty() ? "" : left[0].string())
                              << "\n"
                              << run.stderr_text;
    tally.temp_files_cleaned += static_cast<int>(before - std::min(before, left.size()));
  }

 protected:
  std::vector<Target> targets_;
};

// ---------------------------------------------------------------------------------------------
// check-hotfix through the real stack.

constexpr char kServedMap[] =
    R"({"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}})";
constexpr char kOldPointer[] =
    R"({"version":"202604.01.2","scripts_version":"202604.01.1","hotfixes":{"202604.01":"202604.01.2"}})";
constexpr char kNewPointer[] =
    R"({"version":"202604.01.2","scripts_version":"202604.01.1","hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}})";

class CheckHotfixScenario : public Scenario {
 public:
  CheckHotfixScenario() {
    stack_.lps.SetConfig(kServedMap);
    dir_.Write("config.json", NodeConfigJson(kApiserverFqdn, ca_.cert_pem()).dump());
    fs::create_directories(dir_.File("opt"));
    // boothook writes the pointer 0600 and a rewrite keeps its bits.
    targets_ = {
        {dir_.File("opt/aks-node-controller-hotfix.json"), kOldPointer, 0600, kNewPointer, 0600}};
  }

  std::string Name() const override { return "check-hotfix"; }
  SpawnOptions Spawn() const override {
    CheckHotfixArgs args;
    args.node_config = dir_.File("config.json");
    args.nbc_cmd = dir_.File("nbc-cmd.sh");
    args.pointer = dir_.File("opt/aks-node-controller-hotfix.json");
    args.imds_url = imds_.document_url();
    args.connect_to = stack_.proxy.frontend_address();
    args.events_dir = EventsDir();
    args.log_file = dir_.File("agent.log");
    return CheckHotfixSpawn(args);
  }
  std::vector<fs::path> WatchedDirs() const override { return {dir_.File("opt")}; }
  std::string TempPrefix() const override { return ".aks-node-controller-hotfix-"; }
  fs::path EventsDir() const override { return dir_.File("events"); }
  fs::path Root() const override { return dir_.path(); }

  void ExpectExit(const ExitStatus& status, const Reported& reported,
                  const std::vector<Found>& found, bool) const override {
    // Fail-open: exit 0 whatever happened, and `lpsRead` only with the new pointer in place.
    EXPECT_TRUE(status.success()) << status.ToString();
    if (reported.outcome.empty()) return;  // the fault hit the event's own write
    if (found[0] == Found::kOld) {
      EXPECT_EQ(reported.outcome, "failed") << reported.message;
    } else {
      EXPECT_THAT(reported.outcome, ::testing::AnyOf("lpsRead", "failed")) << reported.message;
    }
  }
  // "an unreadable or invalid existing file is logged and carries nothing over"
  // (docs/CHECK-HOTFIX.md): an error reading the old pointer stages the served map alone.
  bool DocumentedOther(const Target&, const std::string& content) const override {
    return content == kServedMap;
  }

 private:
  TestCa ca_ = TestCa::Create("test-cluster-ca");
  ProxiedLps stack_{ca_, kApiserverFqdn};
  ImdsStandin imds_;
  TempDir dir_{"crash-check-hotfix"};
};

// ---------------------------------------------------------------------------------------------
// download-hotfix with stand-ins for apt-get, dpkg and dpkg-query first on PATH.

class DownloadHotfixScenario : public Scenario {
 public:
  explicit DownloadHotfixScenario(bool scripts) : scripts_(scripts) {
    for (const char* d : {"opt", "usr/bin", "etc/apt/sources.list.d", "etc/scripts", "fakebin"}) {
      fs::create_directories(node_.File(d));
    }
    node_.Write("etc/os-release", "ID=ubuntu\n");
    node_.Write("etc/apt/sources.list.d/microsoft-prod.list",
                "deb [arch=amd64] https://packages.microsoft.com/ubuntu/22.04/prod jammy main\n");
    WriteAll(node_.File("opt/aks-node-controller"), "#!/bin/sh\necho vhd\n", 0750);
    for (const char* tool : {"dpkg", "apt-get"}) {
      WriteAll(node_.File(std::string("fakebin/") + tool), "#!/bin/sh\nexit 0\n", 0755);
    }
    WriteAll(node_.File("fakebin/dpkg-query"), "#!/bin/sh\nprintf 'installed\\t202604.01.1\\n'\n",
             0755);
    if (scripts_) {
      // The pointer is a target too: it is read, never written, and must stay as it was.
      const std::string pointer = R"({"scripts_version":"202604.01.1"})";
      targets_ = {{node_.File("opt/aks-node-controller-hotfix.json"), pointer, 0644, pointer, 0644},
                  {node_.File("etc/scripts/provision.sh"), OldScript(), 0750, NewScript(), 0750},
                  {node_.File("etc/scripts/new-helper.sh"), std::nullopt, 0,
                   "#!/bin/sh\necho new helper\n", 0700 & ~Umask()}};
    } else {
      const std::string pointer = R"({"hotfixes":{"202604.01":"202604.01.1"}})";
      // The old staged binary has other bits than the VHD's 0750, so that a mode that does
      // not travel with its content shows.
      targets_ = {
          {node_.File("opt/aks-node-controller-hotfix.json"), pointer, 0644, pointer, 0644},
          {node_.File("opt/aks-node-controller-hotfix"), OldBinary(), 0700, NewBinary(), 0750},
          {node_.File("opt/aks-node-controller"), "#!/bin/sh\necho vhd\n", 0750,
           "#!/bin/sh\necho vhd\n", 0750}};
      // The package's binary: a few MiB, so that the copy is a window worth hitting.
      WriteAll(node_.File("usr/bin/aks-node-controller"), targets_[1].new_content, 0755);
    }
    if (scripts_) {
      // One file that exists (keeps its mode and owner: fchown), one the run creates, one
      // large enough that its write takes a while.
      std::ostringstream yaml;
      yaml << "write_files:\n"
           << "- path: " << node_.File("etc/scripts/provision.sh").string() << "\n"
           << "  permissions: \"0755\"\n  encoding: base64\n  content: "
           << EncodeStdBase64(targets_[1].new_content) << "\n"
           << "- path: " << node_.File("etc/scripts/new-helper.sh").string() << "\n"
           << "  permissions: \"0700\"\n  content: |\n    #!/bin/sh\n    echo new helper\n";
      node_.Write("opt/nodecustomdata.yml", yaml.str());
    }
  }

  static std::string NewBinary() { return Filler(4 << 20, 1); }
  static std::string OldBinary() { return Filler(3 << 20, 2); }
  static std::string NewScript() { return "#!/bin/sh\n# new\n" + Filler(1 << 20, 3); }
  static std::string OldScript() { return "#!/bin/sh\n# old\n" + Filler(1 << 20, 4); }

  std::string Name() const override {
    return scripts_ ? "download-hotfix write_files" : "download-hotfix binary";
  }
  SpawnOptions Spawn() const override {
    SpawnOptions spawn;
    spawn.argv = {BinDir() + "/hotfix-agent",
                  "download-hotfix",
                  "--hotfix-pointer",
                  node_.File("opt/aks-node-controller-hotfix.json"),
                  "--current-version",
                  "202604.01.0",
                  "--os-release",
                  node_.File("etc/os-release"),
                  "--apt-sources-dir",
                  node_.File("etc/apt/sources.list.d"),
                  "--package-binary",
                  node_.File("usr/bin/aks-node-controller"),
                  "--vhd-binary",
                  node_.File("opt/aks-node-controller"),
                  "--hotfix-binary",
                  node_.File("opt/aks-node-controller-hotfix"),
                  "--node-custom-data",
                  node_.File("opt/nodecustomdata.yml"),
                  "--retry-backoff",
                  "10ms",
                  "--events-dir",
                  EventsDir(),
                  "--log-file",
                  node_.File("agent.log")};
    spawn.env["PATH"] = node_.File("fakebin").string() +
                        ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    return spawn;
  }
  std::vector<fs::path> WatchedDirs() const override {
    if (scripts_) return {node_.File("etc/scripts"), node_.File("opt")};
    return {node_.File("opt")};
  }
  std::string TempPrefix() const override {
    return scripts_ ? ".aks-node-controller-write-" : ".aks-node-controller-update-";
  }
  fs::path EventsDir() const override { return node_.File("events"); }

  void ExpectExit(const ExitStatus& status, const Reported& reported,
                  const std::vector<Found>& found, bool in_window) const override {
    ASSERT_TRUE(status.exited) << "download-hotfix crashed: " << status.ToString();
    const bool all_new =
        std::all_of(found.begin(), found.end(), [](Found f) { return f == Found::kNew; });
    if (scripts_) {
      // Best effort: a scripts failure is a warning and the binary step (nothing to install
      // here) decides the exit code.
      EXPECT_EQ(status.exit_code, 0) << reported.message;
      if (reported.message.empty()) return;
      if (!all_new) {
        EXPECT_THAT(reported.message, ::testing::AnyOf(::testing::HasSubstr("scripts=failed"),
                                                       ::testing::HasSubstr("scripts=skipped")));
      }
      if (reported.message.find("scripts=applied") != std::string::npos) {
        EXPECT_TRUE(all_new);
      }
      return;
    }
    if (status.exit_code == 0) {
      // Success is claimed only with the binary staged (or fail-open on an unreadable pointer).
      if (reported.outcome != "pointerUnreadable") {
        EXPECT_TRUE(all_new) << reported.message;
      }
      if (!reported.outcome.empty() && all_new) {
        EXPECT_EQ(reported.outcome, "installed");
      }
    } else {
      if (in_window) {
        EXPECT_EQ(status.exit_code, 1) << "a staging error exits 1";
      }
      if (!reported.outcome.empty()) {
        EXPECT_EQ(reported.outcome, "failed") << reported.message;
      }
    }
  }
  fs::path Root() const override { return node_.path(); }

 private:
  static mode_t Umask() {
    mode_t mask = ::umask(0);
    ::umask(mask);
    return mask;
  }

  bool scripts_;
  TempDir node_{"crash-download-hotfix"};
};

// ---------------------------------------------------------------------------------------------
// Random SIGKILLs.

struct Timing {
  std::chrono::microseconds run{0};      // a clean run's wall time
  std::chrono::microseconds staging{0};  // from spawn to the first target's last write
};

// Clean runs from the old state: how long a run takes and when in it the staging happens, so
// that kill delays cover the whole run and the staging window in particular.
Timing Measure(const Scenario& s, Tally& tally) {
  std::vector<Timing> runs;
  for (int i = 0; i < 3; ++i) {
    Timing t;
    s.Reset();
    const auto wall_start = std::chrono::system_clock::now();
    RunResult run = RunProcess(s.Spawn(), kRunTimeout);
    std::vector<Found> found = s.Inspect(s.Name() + " timing run");
    s.ExpectExit(run.status, s.ReadReported(), found, true);
    EXPECT_TRUE(std::all_of(found.begin(), found.end(), [](Found f) { return f == Found::kNew; }))
        << run.stderr_text;
    t.run = std::chrono::duration_cast<std::chrono::microseconds>(run.status.wall_time);
    // The first target that changes: its mtime is when its content was written.
    for (const Target& target : s.Targets()) {
      if (target.old_content && *target.old_content == target.new_content) continue;
      struct stat st {};
      if (::stat(target.path.c_str(), &st) != 0) continue;
      const auto mtime = std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::seconds(st.st_mtim.tv_sec) +
              std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
      t.staging = std::chrono::duration_cast<std::chrono::microseconds>(mtime - wall_start);
      break;
    }
    runs.push_back(t);
    ++tally.clean_runs;
  }
  // The median of each: the first run also pays for cold caches.
  Timing t;
  std::sort(runs.begin(), runs.end(),
            [](const Timing& a, const Timing& b) { return a.run < b.run; });
  t.run = runs[1].run;
  std::sort(runs.begin(), runs.end(),
            [](const Timing& a, const Timing& b) { return a.staging < b.staging; });
  t.staging = runs[1].staging;
  return t;
}

void RandomKills(const Scenario& s, int kills, std::mt19937_64& rng, Tally& tally) {
  const Timing timing = Measure(s, tally);
  std::cout << "[crash] " << s.Name() << ": a clean run takes " << timing.run.count() / 1000
            << " ms, staging at ~" << timing.staging.count() / 1000 << " ms\n";
  // Half the kills anywhere in the run (start-up included), half around the staging moment:
  // uniform delays alone would rarely land in a window of a few milliseconds.
  std::uniform_real_distribution<double> anywhere(0, timing.run.count());
  const double width = std::max(20000.0, 0.15 * timing.run.count());
  std::uniform_real_distribution<double> near_staging(std::max(0.0, timing.staging.count() - width),
                                                      timing.staging.count() + width / 2);
  for (int i = 0; i < kills; ++i) {
    const std::string context = s.Name() + " kill #" + std::to_string(i);
    s.Reset();
    const auto delay = std::chrono::microseconds(
        static_cast<int64_t>(i % 2 == 0 ? anywhere(rng) : near_staging(rng)));
    const size_t temps_before = s.TempFiles().size();
    ExitStatus status;
    {
      Subprocess agent(s.Spawn());
      std::this_thread::sleep_for(delay);
      if (agent.running()) agent.Signal(SIGKILL);
      status = agent.Wait(kRunTimeout);
    }
    ++tally.runs;
    const std::vector<Found> found = s.Inspect(context);
    const size_t temps = s.TempFiles().size() - std::min(temps_before, s.TempFiles().size());
    tally.temp_files_left += static_cast<int>(temps);
    const long changed = ChangedFound(found, s.Targets());
    if (status.exited) {
      ++tally.exited_before_kill;
      s.ExpectExit(status, s.ReadReported(), found, true);
    } else {
      EXPECT_EQ(status.term_signal, SIGKILL) << context << ": " << status.ToString();
      if (temps > 0) {
        ++tally.found_old_with_temp;
      } else if (changed == Changing(s.Targets())) {
        ++tally.found_new;
      } else if (changed > 0) {
        ++tally.found_mixed;
      } else {
        ++tally.found_old;
      }
    }
    if (::testing::Test::HasFailure()) return;
    // Leftovers accumulate between clean runs, which must remove all of them.
    if (i % 10 == 9 || i + 1 == kills) {
      s.CleanRun(context, tally);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// strace fault injection at each system call.

// One system call of a traced run: its name and, per name, its occurrence number (from 1).
struct TracedCall {
  std::string name;
  int occurrence = 0;
  std::string line;
  bool after_main = false;  // after the first call touching the scenario's files
  bool in_window = false;   // inside the staging sequence
};

SpawnOptions UnderStrace(SpawnOptions spawn, std::vector<std::string> strace_args) {
  std::vector<std::string> argv = {"strace", "-qq"};
  argv.insert(argv.end(), strace_args.begin(), strace_args.end());
  argv.push_back("--");
  argv.insert(argv.end(), spawn.argv.begin(), spawn.argv.end());
  spawn.argv = std::move(argv);
  // LeakSanitizer cannot run under ptrace and would turn every exit into 1.
  const char* asan = std::getenv("ASAN_OPTIONS");
  spawn.env["ASAN_OPTIONS"] = std::string(asan != nullptr ? asan : "") + ":detect_leaks=0";
  return spawn;
}

std::string JoinSyscalls() {
  std::string out;
  for (const auto& s : kStagingSyscalls) out += (out.empty() ? "" : ",") + s;
  return out;
}

// Runs the scenario once under strace (its main thread only: -f would also count the package
// manager stand-ins' and helper threads' calls) and numbers the calls.
std::vector<TracedCall> TraceRun(const Scenario& s, const TempDir& scratch) {
  s.ResetWithOneStaleTemp();
  const fs::path trace = scratch.File("trace.txt");
  RunResult run = RunProcess(
      UnderStrace(s.Spawn(), {"-o", trace.string(), "-e", "trace=" + JoinSyscalls()}), kRunTimeout);
  EXPECT_TRUE(run.status.success()) << run.status.ToString() << run.stderr_text;
  std::vector<TracedCall> calls;
  std::map<std::string, int> counts;
  std::istringstream in(ReadFile(trace));
  const std::string root = s.Root().string();
  bool after_main = false;
  for (std::string line; std::getline(in, line);) {
    const size_t paren = line.find('(');
    if (paren == std::string::npos || line.rfind("---", 0) == 0 || line.rfind("+++", 0) == 0) {
      continue;
    }
    // The sanitizer runtime probes memory by writing 16 bytes of it into a pipe (and
    // CHECK-fails on any error but EFAULT): its calls, not the program's.
    // Counted (strace numbers them too) but never hit.
    static const std::regex kSanitizerProbe(R"(^write\(\d+, "(\\0){8}.*", 16\) = 16$)");
    TracedCall c;
    c.name = line.substr(0, paren);
    c.occurrence = ++counts[c.name];
    c.line = line;
    after_main = after_main || line.find(root) != std::string::npos;
    c.after_main = after_main && !std::regex_search(line, kSanitizerProbe);
    calls.push_back(c);
  }
  // The staging sequence: from the first open of a watched folder (its lock) or of a temp file,
  // through the first rename of a temp file, to the close of every descriptor opened on the way
  // (the temp file, the folder fsynced after the rename, the lock).
  std::vector<std::string> starts;
  for (const fs::path& d : s.WatchedDirs()) starts.push_back("\"" + d.string() + "\", ");
  const std::string temp = "/" + s.TempPrefix();
  size_t first = calls.size(), last_rename = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string& l = calls[i].line;
    bool opens_staging = calls[i].name == "openat" && l.find(temp) != std::string::npos;
    for (const auto& st : starts) {
      opens_staging |= calls[i].name == "openat" && l.find(st) != std::string::npos &&
                       l.find("O_DIRECTORY") != std::string::npos;
    }
    if (opens_staging && first == calls.size()) first = i;
    // The first file's: write_files repeats the same sequence per file (the full form covers
    // the others, as every call after main()).
    if (calls[i].name == "rename" && l.find(temp) != std::string::npos && last_rename == 0) {
      last_rename = i;
    }
  }
  EXPECT_LT(first, calls.size()) << "no staging sequence found in the trace";
  EXPECT_GT(last_rename, first) << "no rename of a temp file in the trace";
  if (first >= calls.size() || last_rename <= first) return calls;
  std::set<std::string> open_fds;
  size_t end = last_rename;
  static const std::regex kFd(R"(^[a-z0-9]+\((\d+)[,)])");
  static const std::regex kRet(R"(= (\d+)$)");
  for (size_t i = first; i < calls.size(); ++i) {
    std::smatch m;
    if (calls[i].name == "openat" && (i <= last_rename + 1) &&
        std::regex_search(calls[i].line, m, kRet)) {
      open_fds.insert(m[1]);
    } else if (calls[i].name == "close" && std::regex_search(calls[i].line, m, kFd) &&
               open_fds.erase(m[1]) > 0) {
      end = std::max(end, i);
    }
    if (i > last_rename && open_fds.empty()) break;
  }
  for (size_t i = first; i <= end; ++i) calls[i].in_window = true;
  return calls;
}

struct InjectionTally {
  std::map<std::string, std::pair<int, int>> range;  // syscall -> [first N, last N] enumerated
  int kills = 0;
  int kills_missed = 0;  // the Nth call did not come in this run (full form, outside the window)
  int errors = 0;
  int found_old = 0;
  int found_new = 0;
  int documented_other = 0;
  int temp_files_left = 0;
  int temp_files_cleaned = 0;
  int clean_runs = 0;
};

enum class Fault { kSigkill, kEio };

void InjectEach(const Scenario& s, const std::vector<TracedCall>& calls, bool every_call,
                Fault kind, InjectionTally& it) {
  Tally clean;
  int injected = 0;
  for (const TracedCall& c : calls) {
    if (!(every_call ? c.after_main : c.in_window)) continue;
    auto& [lo, hi] = it.range[c.name];
    lo = lo == 0 ? c.occurrence : std::min(lo, c.occurrence);
    hi = std::max(hi, c.occurrence);
    {
      const bool kill = kind == Fault::kSigkill;
      const std::string fault = kill ? "signal=SIGKILL" : "error=EIO";
      const std::string context = s.Name() + ": " + c.name + " #" + std::to_string(c.occurrence) +
                                  " " + fault + " (" + c.line.substr(0, 120) + ")";
      s.ResetForInjection();
      const std::vector<fs::path> temps_before = s.TempFiles();
      auto run_injected = [&] {
        return RunProcess(UnderStrace(s.Spawn(), {"-o", "/dev/null", "-e", "trace=" + c.name, "-e",
                                                  "inject=" + c.name + ":" + fault +
                                                      ":when=" + std::to_string(c.occurrence)}),
                          kRunTimeout);
      };
      RunResult run = run_injected();
      // UBSan's type check probes memory with a write of its own when its cache misses, and the
      // cache is keyed by addresses that ASLR moves: in some runs the Nth write is that probe,
      // which CHECK-fails on any error but EFAULT. The fault then hit the test's
      // instrumentation, not the program: the same injection again, whose numbering lands on
      // the program's call (a run is a few tens of milliseconds).
      for (int retry = 0;
           retry < 5 && !kill &&
           run.stderr_text.find("CHECK failed: sanitizer_posix_libcdep") != std::string::npos;
           ++retry) {
        s.ResetForInjection();
        run = run_injected();
      }
      int other = 0;
      const std::vector<Found> found = s.Inspect(context, !kill, &other);
      it.documented_other += other;
      if (kill) {
        ++it.kills;
        if (run.status.exited) {
          // Calls outside the staging sequence may vary from run to run (timing); a kill that
          // found no Nth call is a clean run.
          EXPECT_FALSE(c.in_window)
              << context << ": the injected kill did not happen: " << run.status.ToString();
          ++it.kills_missed;
        }
      } else {
        ++it.errors;
        s.ExpectExit(run.status, s.ReadReported(), found, c.in_window);
      }
      const bool any_old = std::count(found.begin(), found.end(), Found::kOld) > 0;
      (any_old ? it.found_old : it.found_new)++;
      const std::vector<fs::path> temps = s.TempFiles();
      for (const fs::path& t : temps) {
        if (std::find(temps_before.begin(), temps_before.end(), t) == temps_before.end()) {
          ++it.temp_files_left;
        }
      }
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << context << "\n" << run.stderr_text;
        return;
      }
      if (other > 0) s.Reset();  // the carried keys are gone: the clean run starts from old
      // Leftovers accumulate between clean runs, which must remove all of them.
      if (++injected % 10 == 0) {
        s.CleanRun(context, clean);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  s.Reset();
  s.CleanRun(s.Name() + " after the injections", clean);
  it.temp_files_cleaned += clean.temp_files_cleaned;
  it.clean_runs += clean.clean_runs;
}

void RunInjection(const Scenario& s, Fault kind) {
  TempDir scratch("crash-trace");
  const std::vector<TracedCall> calls = TraceRun(s, scratch);
  ASSERT_FALSE(::testing::Test::HasFailure());
  std::map<std::string, int> total, window;
  for (const auto& c : calls) {
    ++total[c.name];
    if (c.in_window) ++window[c.name];
  }
  std::cout << "[crash] " << s.Name() << ": traced calls (in the staging sequence / in all):";
  for (const auto& [name, n] : total) std::cout << " " << name << " " << window[name] << "/" << n;
  std::cout << "\n[crash] " << s.Name() << ": staging sequence:\n";
  for (const auto& c : calls) {
    if (c.in_window)
      std::cout << "[crash]   " << c.name << " #" << c.occurrence << "  " << c.line.substr(0, 110)
                << "\n";
  }
  const auto start = std::chrono::steady_clock::now();
  InjectionTally it;
  InjectEach(s, calls, FullRun(), kind, it);
  const auto secs =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
  if (kind == Fault::kSigkill) {
    std::cout << "[crash] " << s.Name() << ": injected " << it.kills << " SIGKILLs ("
              << it.kills_missed << " found no such call) at";
  } else {
    std::cout << "[crash] " << s.Name() << ": injected " << it.errors << " EIO errors at";
  }
  for (const auto& [name, r] : it.range)
    std::cout << " " << name << "#" << r.first << ".." << r.second;
  std::cout << "; found old " << it.found_old << ", new " << it.found_new;
  if (it.documented_other > 0) {
    std::cout << " (" << it.documented_other
              << " the served map alone: the old pointer could not be read)";
  }
  std::cout << "; " << it.temp_files_left << " temp files left, all removed by later runs ("
            << it.temp_files_cleaned << " by the " << it.clean_runs << " clean runs), none left; "
            << secs.count() << " s\n";
}

// ---------------------------------------------------------------------------------------------

class CrashConsistencyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::cout << "[crash] seed " << Seed() << " (CRASH_SEED=" << Seed() << " replays it); "
              << KillsPerScenario() << " random kills per scenario; strace "
              << (FullRun() ? "at every call after main()" : "at each call of the staging sequence")
              << "\n";
  }

  void RunKills(const Scenario& s) {
    // One stream per scenario, so that a seed replays each test alone too.
    std::mt19937_64 rng(Seed() ^ std::hash<std::string>{}(s.Name()));
    Tally tally;
    const auto start = std::chrono::steady_clock::now();
    RandomKills(s, KillsPerScenario(), rng, tally);
    const auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
    std::cout << "[crash] " << s.Name() << " random SIGKILLs: " << tally.Summary() << "; "
              << secs.count() << " s\n";
  }
};

bool HaveStrace() {
  SpawnOptions spawn;
  spawn.argv = {"strace", "-V"};
  return RunProcess(std::move(spawn), 10s).status.success();
}

TEST_F(CrashConsistencyTest, CheckHotfixRandomKills) {
  CheckHotfixScenario s;
  RunKills(s);
}

TEST_F(CrashConsistencyTest, DownloadHotfixBinaryRandomKills) {
  DownloadHotfixScenario s(false);
  RunKills(s);
}

TEST_F(CrashConsistencyTest, DownloadHotfixWriteFilesRandomKills) {
  DownloadHotfixScenario s(true);
  RunKills(s);
}

TEST_F(CrashConsistencyTest, CheckHotfixSigkillAtEachSyscall) {
  ASSERT_TRUE(HaveStrace()) << "strace is missing: scripts/install-deps.sh installs it";
  CheckHotfixScenario s;
  RunInjection(s, Fault::kSigkill);
}

TEST_F(CrashConsistencyTest, CheckHotfixEioAtEachSyscall) {
  ASSERT_TRUE(HaveStrace()) << "strace is missing: scripts/install-deps.sh installs it";
  CheckHotfixScenario s;
  RunInjection(s, Fault::kEio);
}

TEST_F(CrashConsistencyTest, DownloadHotfixBinarySigkillAtEachSyscall) {
  ASSERT_TRUE(HaveStrace()) << "strace is missing: scripts/install-deps.sh installs it";
  DownloadHotfixScenario s(false);
  RunInjection(s, Fault::kSigkill);
}

TEST_F(CrashConsistencyTest, DownloadHotfixBinaryEioAtEachSyscall) {
  ASSERT_TRUE(HaveStrace()) << "strace is missing: scripts/install-deps.sh installs it";
  DownloadHotfixScenario s(false);
  RunInjection(s, Fault::kEio);
}

TEST_F(CrashConsistencyTest, DownloadHotfixWriteFilesSigkillAtEachSyscall) {
  ASSERT_TRUE(HaveStrace()) << "strace is missing: scripts/install-deps.sh installs it";
  DownloadHotfixScenario s(true);
  RunInjection(s, Fault::kSigkill);
}

TEST_F(CrashConsistencyTest, DownloadHotfixWriteFilesEioAtEachSyscall) {
  ASSERT_TRUE(HaveStrace()) << "strace is missing: scripts/install-deps.sh installs it";
  DownloadHotfixScenario s(true);
  RunInjection(s, Fault::kEio);
}

}  // namespace
}  // namespace hotfix::testsupport
