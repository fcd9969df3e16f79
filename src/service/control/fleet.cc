#include "service/control/fleet.h"

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <unordered_set>
#include <utility>

#include "common/text.h"

namespace hotfix::service {

namespace {

bool HasSpaceOrControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char u) { return u <= 0x20 || u == 0x7f; });
}

// Builds a NodeList line by line (from a string or a stream).
class NodeListBuilder {
 public:
  Status AddLine(size_t line_no, std::string_view raw) {
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const std::string line(TrimBlanks(raw));
    if (line.empty() || line[0] == '#') return Status::Ok();
    const std::string where = "line " + std::to_string(line_no) + ": ";
    std::vector<std::string> fields;
    size_t start = 0;
    for (;;) {
      const size_t comma = line.find(',', start);
      fields.emplace_back(TrimBlanks(std::string_view(line).substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (fields.size() != 3) {
      return Status::InvalidArgument(where + "expected vmId,subscriptionId,clusterHost, found " +
                                     std::to_string(fields.size()) + " field" +
                                     (fields.size() == 1 ? "" : "s"));
    }
    static constexpr const char* kNames[] = {"vmId", "subscriptionId", "clusterHost"};
    static constexpr size_t kMaxChars[] = {64, 64, 253 + 6};  // the host may carry :port
    for (size_t i = 0; i < 3; ++i) {
      if (fields[i].empty()) return Status::InvalidArgument(where + kNames[i] + " is empty");
      if (fields[i].size() > kMaxChars[i]) {
        return Status::InvalidArgument(where + kNames[i] + " is longer than " +
                                       std::to_string(kMaxChars[i]) + " characters");
      }
      if (HasSpaceOrControl(fields[i])) {
        return Status::InvalidArgument(where + kNames[i] +
                                       " contains a space or a control character");
      }
    }
    RolloutNode node = MakeRolloutNode(fields[0], fields[1], fields[2]);
    if (node.cluster.empty()) {
      return Status::InvalidArgument(where + "clusterHost " + fields[2] + " has no host");
    }
    if (!seen_.insert(node.vm_id + '\n' + node.subscription + '\n' + node.cluster).second) {
      ++list_.duplicates;
      return Status::Ok();
    }
    if (list_.nodes.size() >= kMaxFleetNodes) {
      return Status::InvalidArgument(where + "more than " + std::to_string(kMaxFleetNodes) +
                                     " nodes (the simulate limit)");
    }
    list_.nodes.push_back(std::move(node));
    return Status::Ok();
  }

  NodeList Take() { return std::move(list_); }

 private:
  NodeList list_;
  std::unordered_set<std::string> seen_;
};

std::string Guid(std::mt19937_64& rng) {
  uint64_t a = rng(), b = rng();
  a = (a & ~uint64_t{0xF000}) | uint64_t{0x4000};            // version 4
  b = (b & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);  // RFC 4122 variant
  char buf[40];
  std::snprintf(
      buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx",
      static_cast<unsigned long long>(a >> 32), static_cast<unsigned long long>((a >> 16) & 0xFFFF),
      static_cast<unsigned long long>(a & 0xFFFF), static_cast<unsigned long long>(b >> 48),
      static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFULL));
  return buf;
}

}  // namespace

StatusOr<NodeList> ParseNodeList(std::string_view text) {
  NodeListBuilder builder;
  size_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    Status st = builder.AddLine(++line_no, text.substr(start, end - start));
    if (!st.ok()) return st;
    start = end + 1;
  }
  return builder.Take();
}

StatusOr<NodeList> ReadNodeFile(const std::string& path) {
  // A stream, not a whole-file read: `--nodes <(grep ... access.log | ...)` is a FIFO.
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) return Status::FromErrno("reading " + path, errno);
  NodeListBuilder builder;
  char* line = nullptr;
  size_t capacity = 0;
  size_t line_no = 0;
  Status st;
  for (;;) {
    errno = 0;
    const ssize_t n = ::getline(&line, &capacity, file);
    if (n < 0) {
      if (errno != 0) st = Status::FromErrno("reading " + path, errno);
      break;
    }
    std::string_view text(line, static_cast<size_t>(n));
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    st = builder.AddLine(++line_no, text);
    if (!st.ok()) break;
  }
  std::free(line);
  std::fclose(file);
  if (!st.ok()) return st;
  return builder.Take();
}

StatusOr<std::vector<RolloutNode>> RandomFleet(const RandomFleetOptions& options) {
  if (options.count == 0 || options.count > kMaxFleetNodes) {
    return Status::InvalidArgument("a random fleet has 1 to " + std::to_string(kMaxFleetNodes) +
                                   " nodes, not " + std::to_string(options.count));
  }
  for (const auto* list : {&options.subscriptions, &options.clusters}) {
    for (const std::string& entry : *list) {
      if (entry.empty() || HasSpaceOrControl(entry)) {
        return Status::InvalidArgument("random fleet: \"" + entry +
                                       "\" is not a subscription or cluster host");
      }
    }
  }
  std::mt19937_64 rng(options.seed);
  std::vector<std::string> subscriptions = options.subscriptions;
  if (subscriptions.empty()) {
    for (int i = 0; i < 5; ++i) subscriptions.push_back(Guid(rng));
  }
  std::vector<std::string> clusters = options.clusters;
  if (clusters.empty()) {
    static constexpr const char* kRegions[] = {"eastus", "westeurope", "southeastasia", "westus2"};
    for (int i = 0; i < 8; ++i) {
      const uint64_t r = rng();
      char host[128];
      std::snprintf(host, sizeof host, "aks-%06llx-dns-%08llx.hcp.%s.azmk8s.io",
                    static_cast<unsigned long long>(r >> 40),
                    static_cast<unsigned long long>(r & 0xFFFFFFFFULL), kRegions[i % 4]);
      clusters.push_back(host);
    }
  }
  std::vector<RolloutNode> fleet;
  fleet.reserve(options.count);
  for (size_t i = 0; i < options.count; ++i) {
    const std::string vm_id = Guid(rng);
    const std::string& subscription = subscriptions[rng() % subscriptions.size()];
    const std::string& cluster = clusters[rng() % clusters.size()];
    fleet.push_back(MakeRolloutNode(vm_id, subscription, cluster));
  }
  return fleet;
}

}  // namespace hotfix::service
