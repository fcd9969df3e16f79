#include "temp_dir.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "text_util.h"

namespace hotfix::testsupport {

TempDir::TempDir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/" + std::string(prefix) + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
  }
  path_ = buf.data();
  const char* keep = std::getenv("LP_KEEP_TEMP");
  keep_ = keep && std::string_view(keep) == "1";
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ignored;  // best effort: a destructor must not throw
  // A test may leave the folder read-only: give it back its write bit first.
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ignored);
  std::filesystem::remove_all(path_, ignored);
}

std::filesystem::path TempDir::Write(std::string_view name, std::string_view contents,
                                     mode_t mode) const {
  std::filesystem::path path = File(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) throw std::runtime_error("writing " + path.string());
  if (::chmod(path.c_str(), mode) != 0) throw std::runtime_error("chmod " + path.string());
  return path;
}

std::string TempDir::Read(std::string_view name) const { return ReadFile(File(name)); }

std::vector<std::string> TempDir::Names() const {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path_)) {
    names.push_back(entry.path().filename());
  }
  std::sort(names.begin(), names.end());
  return names;
}

mode_t ModeOf(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    throw std::runtime_error("lstat " + path.string() + ": " + std::strerror(errno));
  }
  return st.st_mode & 07777;
}

}  // namespace hotfix::testsupport
