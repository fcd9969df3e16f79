#include "node/check/pointer_staging.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "common/file_lock.h"
#include "common/file_util.h"

namespace hotfix::node {
namespace {

// The link's target when path is a symlink (dangling or not), else nullopt.
std::optional<std::string> SymlinkTarget(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return std::nullopt;
  std::vector<char> buf(PATH_MAX);
  ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
  return n < 0 ? std::string("?") : std::string(buf.data(), static_cast<size_t>(n));
}

// The mode of a pointer check-hotfix creates. An existing file keeps its own bits: boothook
// writes it 0600 and a rewrite must not loosen or tighten that.
constexpr mode_t kNewPointerMode = 0644;

// The plan and its bytes: the size check and the write serialise once.
struct Plan {
  HotfixPointer pointer;
  std::string bytes;
};

StatusOr<Plan> MakePlan(const std::string& path, const HotfixMap& hotfixes, Logger& log) {
  Plan plan;
  StatusOr<HotfixPointer> existing = ReadHotfixPointer(path);
  if (existing.ok()) {
    // Only these two survive; hotfixes is replaced whole and unknown keys are dropped.
    plan.pointer.version = existing->version;
    plan.pointer.scripts_version = existing->scripts_version;
  } else {
    log.Warn(
        "could not read existing hotfix pointer; version/scripts_version will not be preserved",
        {{"path", path}, {"error", existing.status()}});
  }
  plan.pointer.hotfixes = hotfixes;
  plan.bytes = SerializeHotfixPointer(plan.pointer);
  if (plan.bytes.size() > kMaxPointerBytes) {
    return Status::InvalidArgument("hotfix pointer would be " + std::to_string(plan.bytes.size()) +
                                   " bytes; download-hotfix reads at most " +
                                   std::to_string(kMaxPointerBytes));
  }
  return plan;
}

StatusOr<HotfixPointer> WritePlanned(const std::string& path, const HotfixMap& hotfixes,
                                     Logger& log) {
  StatusOr<Plan> plan = MakePlan(path, hotfixes, log);
  if (!plan.ok()) return plan.status();
  AtomicWriteOptions options;
  options.mode = ExistingMode(path).value_or(kNewPointerMode);
  options.temp_prefix = kPointerTempPrefix;
  // A node that reboots usually gets the answer it already staged: leave the file, and the
  // disk, alone.
  auto current = ReadFileToString(path, plan->bytes.size() + 1);
  if (current.ok() && *current == plan->bytes) return std::move(plan->pointer);
  // rename(2) replaces the path itself: a symlink there (dangling or not) becomes a regular
  // file and its target is left alone, as with the reference's os.Rename. Whoever put a link
  // there meant something by it; the run must say that it is gone.
  if (auto target = SymlinkTarget(path)) {
    log.Warn("hotfix pointer path is a symlink; replacing the link with a regular file",
             {{"path", path}, {"target", *target}});
  }
  Status written = WriteFileAtomically(path, plan->bytes, options);
  if (!written.ok()) return written;
  return std::move(plan->pointer);
}

}  // namespace

StatusOr<HotfixPointer> PlanStagedPointer(const std::string& path, const HotfixMap& hotfixes,
                                          Logger& log) {
  StatusOr<Plan> plan = MakePlan(path, hotfixes, log);
  if (!plan.ok()) return plan.status();
  return std::move(plan->pointer);
}

StatusOr<HotfixPointer> StageHotfixes(const std::string& path, const HotfixMap& hotfixes,
                                      Deadline deadline, Logger& log) {
  // The parent folder is not created: a missing /opt/azure/containers means something is
  // badly wrong with the node, and opening it for the lock reports exactly that.
  const std::string dir = DirName(path);
  StatusOr<FileLock> lock = FileLock::OnFolder(dir, deadline);
  if (!lock.ok()) return lock.status();
  // Under the lock, a temp file can only be the leftover of a writer that was killed.
  RemoveStaleTempFiles(dir, kPointerTempPrefix);
  StatusOr<HotfixPointer> written = WritePlanned(path, hotfixes, log);
  if (written.ok()) log.Info("staged hotfix pointer for download-hotfix", {{"path", path}});
  return written;
}

}  // namespace hotfix::node
