#include "service/transport/cgroup_limits.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

namespace hotfix::service {
namespace {

// cgroup v1 reports "no limit" as the largest page-aligned value of a signed 64-bit counter
// (mm/page_counter.h, PAGE_COUNTER_MAX); anything this large is no limit at all.
constexpr uint64_t kUnlimitedAbove = 1ull << 62;

std::optional<uint64_t> ParsePositive(const std::string& text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 ||
      value >= kUnlimitedAbove) {
    return std::nullopt;
  }
  return value;
}

// The file's whitespace-separated words, or nothing when it cannot be read.
std::optional<std::vector<std::string>> ReadWords(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<std::string> words;
  for (std::string w; in >> w && words.size() < 4;) words.push_back(w);
  return words;
}

std::optional<uint64_t> ReadLimitFile(const std::string& path) {
  auto words = ReadWords(path);
  if (!words || words->empty() || (*words)[0] == "max") return std::nullopt;
  return ParsePositive((*words)[0]);
}

// Where this process's cgroup is, for one v1 controller and for v2.
struct CgroupPaths {
  std::optional<std::string> v1;         // the path of the line listing the controller
  std::optional<std::string> v1_folder;  // that line's controllers as mounted: "cpu,cpuacct"
  std::optional<std::string> v2;
};

// Lines are "ID:CONTROLLERS:PATH": v2's is "0::/path"; a v1 line lists its controllers.
CgroupPaths FindCgroup(const std::string& proc_self_cgroup, const std::string& controller) {
  std::ifstream in(proc_self_cgroup);
  CgroupPaths paths;
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      paths.v2 = path;
      continue;
    }
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) {
      if (c == controller) {
        paths.v1 = path;
        paths.v1_folder = controllers;
      }
    }
  }
  return paths;
}

// The first of `dir + path + file` and `dir + file` (a container sees its own cgroup at the
// root) that `read` reads.
template <typename T, typename Read>
std::optional<T> ReadHereOrAtRoot(const std::string& dir, const std::string& path,
                                  const std::string& file, Read read) {
  if (auto v = read(dir + path + "/" + file)) return v;
  return read(dir + "/" + file);
}

std::optional<double> ReadCpuMax(const std::string& path) {
  auto words = ReadWords(path);
  if (!words || words->size() != 2 || (*words)[0] == "max") return std::nullopt;
  auto quota = ParsePositive((*words)[0]), period = ParsePositive((*words)[1]);
  if (!quota || !period) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

}  // namespace

std::optional<uint64_t> CgroupMemoryLimit(const std::string& proc_self_cgroup,
                                          const std::string& cgroup_root) {
  CgroupPaths at = FindCgroup(proc_self_cgroup, "memory");
  if (at.v1) {
    return ReadHereOrAtRoot<uint64_t>(cgroup_root + "/memory", *at.v1, "memory.limit_in_bytes",
                                      ReadLimitFile);
  }
  if (at.v2) return ReadHereOrAtRoot<uint64_t>(cgroup_root, *at.v2, "memory.max", ReadLimitFile);
  return std::nullopt;
}

std::optional<double> CgroupCpuLimit(const std::string& proc_self_cgroup,
                                     const std::string& cgroup_root) {
  CgroupPaths at = FindCgroup(proc_self_cgroup, "cpu");
  if (at.v1) {
    // v1 mounts the controller at its own name or at the joined list ("cpu,cpuacct"); the
    // quota is -1 when unlimited, which ParsePositive refuses.
    for (const std::string& folder : {std::string("cpu"), *at.v1_folder}) {
      const std::string dir = cgroup_root + "/" + folder;
      auto read_pair = [](const std::string& quota_path) -> std::optional<double> {
        const std::string base = quota_path.substr(0, quota_path.rfind('/'));
        auto quota = ReadLimitFile(quota_path);
        auto period = ReadLimitFile(base + "/cpu.cfs_period_us");
        if (!quota || !period) return std::nullopt;
        return static_cast<double>(*quota) / static_cast<double>(*period);
      };
      if (auto v = ReadHereOrAtRoot<double>(dir, *at.v1, "cpu.cfs_quota_us", read_pair)) return v;
    }
    return std::nullopt;
  }
  if (at.v2) return ReadHereOrAtRoot<double>(cgroup_root, *at.v2, "cpu.max", ReadCpuMax);
  return std::nullopt;
}

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int DefaultThreads(std::optional<double> cpu_limit, int usable_cpus) {
  int threads = std::max(1, usable_cpus);
  if (cpu_limit && *cpu_limit > 0) {
    threads = std::min(threads, static_cast<int>(std::ceil(*cpu_limit - 1e-9)));
  }
  return std::max(1, threads);
}

}  // namespace hotfix::service
