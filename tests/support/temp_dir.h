// A scoped temporary folder: created under $TMPDIR (or /tmp) and removed with everything in
// it when the object goes away, also when a test fails (or left a folder read-only).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace hotfix::testsupport {

class TempDir {
 public:
  // mkdtemp("<tmp>/<prefix>-XXXXXX"); throws std::runtime_error on failure.
  explicit TempDir(std::string_view prefix = "lp-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path() / name; nothing is created.
  std::filesystem::path File(std::string_view name) const { return path_ / name; }
  // Writes (replaces) path() / name with these permission bits, whatever the umask, and
  // returns its path.
  std::filesystem::path Write(std::string_view name, std::string_view contents,
                              mode_t mode = 0644) const;
  // Reads a file below path(); empty if it does not exist.
  std::string Read(std::string_view name) const;
  // The names of the entries in path(), sorted.
  std::vector<std::string> Names() const;
  // Keep the folder after destruction (set LP_KEEP_TEMP=1 to keep all of them for debugging).
  void Keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

// The permission bits of the path itself (a symlink's own, not its target's). Throws
// std::runtime_error naming the path if it cannot be read, which fails the test calling it.
mode_t ModeOf(const std::filesystem::path& path);

}  // namespace hotfix::testsupport
