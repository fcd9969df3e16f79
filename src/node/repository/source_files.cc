#include "node/repository/source_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "common/file_util.h"

namespace hotfix::node::repository {
namespace {

constexpr size_t kMaxRepoFiles = 64;
constexpr size_t kMaxRepoFileBytes = 1 << 20;

Status StatExists(const std::string& path, bool* exists) {
  struct stat st {};
  *exists = ::stat(path.c_str(), &st) == 0;
  if (*exists || errno == ENOENT) return Status::Ok();
  return Status::FromErrno("stat " + path, errno);
}

}  // namespace

StatusOr<std::string> ResolveMicrosoftProdSources(const std::string& apt_sources_dir) {
  const std::string list = apt_sources_dir + "/microsoft-prod.list";
  const std::string sources = apt_sources_dir + "/microsoft-prod.sources";
  for (const std::string& candidate : {list, sources}) {
    bool exists = false;
    if (Status st = StatExists(candidate, &exists); !st.ok()) return st;
    if (exists) return candidate;
  }
  return Status::NotFound("neither " + list + " nor " + sources + " exists");
}

std::vector<YumRepoFile> ReadYumRepoFiles(const std::string& yum_repos_dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(yum_repos_dir, ec)) {
    if (entry.path().extension() == ".repo") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.size() > kMaxRepoFiles) paths.resize(kMaxRepoFiles);
  std::vector<YumRepoFile> files;
  for (const std::string& path : paths) {
    StatusOr<std::string> text = ReadFileToString(path, kMaxRepoFileBytes);
    if (text.ok()) files.push_back({path, std::move(*text)});
  }
  return files;
}

}  // namespace hotfix::node::repository
