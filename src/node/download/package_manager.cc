#include "node/download/package_manager.h"

#include <sys/stat.h>

#include <cerrno>

#include "common/file_util.h"
#include "common/process.h"
#include "common/text.h"
#include "node/go/go_strings.h"

namespace hotfix::node {
namespace {

constexpr size_t kMaxOsReleaseBytes = 64 * 1024;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string StripDoubleQuotes(std::string_view s) {
  while (!s.empty() && s.front() == '"') s.remove_prefix(1);
  while (!s.empty() && s.back() == '"') s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

const char* PackageManagerName(PackageManager pm) {
  switch (pm) {
    case PackageManager::kApt:
      return "apt-get";
    case PackageManager::kDnf:
      return "dnf";
    case PackageManager::kTdnf:
      return "tdnf";
  }
  return "?";
}

StatusOr<PackageManager> DetectPackageManager(const std::string& os_release_path) {
  StatusOr<std::string> content = ReadFileToString(os_release_path, kMaxOsReleaseBytes);
  if (!content.ok()) return content.status().Annotate("reading " + os_release_path);
  for (const std::string& line : Lines(*content)) {
    std::string_view trimmed = TrimSpaceLikeGo(line);
    if (trimmed.substr(0, 3) != "ID=") continue;
    const std::string id = AsciiLower(StripDoubleQuotes(trimmed.substr(3)));
    if (id == "ubuntu") return PackageManager::kApt;
    if (id == "azurelinux" || id == "mariner") {
      return FindOnPath("dnf").empty() ? PackageManager::kTdnf : PackageManager::kDnf;
    }
    return Status::InvalidArgument("unsupported OS: " + id);
  }
  return Status::InvalidArgument("ID not found in " + os_release_path);
}

std::vector<Argv> InstallCommands(PackageManager pm, const std::string& version,
                                  const std::string& apt_sources_file) {
  if (pm == PackageManager::kApt) {
    const std::string env = "DEBIAN_FRONTEND=noninteractive";
    return {
        {"env", env, "dpkg", "--configure", "-a", "--force-confdef", "--force-confold"},
        {"env", env, "apt-get", "update", "-o", "Dpkg::Options::=--force-confold", "-o",
         "Dir::Etc::sourcelist=" + apt_sources_file, "-o", "Dir::Etc::sourceparts=-"},
        {"env", env, "apt-get", "install", "-y", "--allow-downgrades", "-o",
         "Dpkg::Options::=--force-confold", std::string(kAgentPackage) + "=" + version + "*"},
    };
  }
  return {{PackageManagerName(pm), "install", "-y", "--refresh", "--allowerasing",
           std::string(kAgentPackage) + "-" + version}};
}

Argv InstalledVersionQuery(PackageManager pm) {
  if (pm == PackageManager::kApt) {
    return {"dpkg-query", "-W", "-f=${db:Status-Status}\\t${Version}\\n", kAgentPackage};
  }
  return {"rpm", "-q", "--qf", "%{VERSION}\\t%{RELEASE}\\n", kAgentPackage};
}

bool InstalledVersionMatches(PackageManager pm, const std::string& query_output,
                             const std::string& requested, std::string* installed) {
  installed->clear();
  for (const std::string& line : Lines(query_output)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    const std::string first = line.substr(0, tab);
    const std::string second = line.substr(tab + 1);
    if (pm == PackageManager::kApt) {
      if (first != "installed") continue;
      *installed = second;
      if (second == requested) return true;
      if (second.size() > requested.size() && second.compare(0, requested.size(), requested) == 0) {
        const char next = second[requested.size()];
        if (next == '-' || next == '+' || next == '~') return true;
      }
    } else {
      *installed = first + "-" + second;
      if (first == requested || *installed == requested) return true;
    }
  }
  return false;
}

}  // namespace hotfix::node
