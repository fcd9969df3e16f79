#include "service/transport/certificate_folder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "common/openssl.h"
#include "common/text.h"

namespace hotfix::service {
namespace {

// A pair's name: a metric label and a log field, so a safe one; as long as a DNS name, so a
// folder may be named after its cluster's apiserver.
bool IsPairName(std::string_view name) { return IsAsciiName(name, 253, /*digit_first=*/true); }

// The folder's entries but the dot-named ones, sorted: a new pair takes the
// room the cap leaves in name order, the same on every replica. Any listing error fails the
// whole list: a partial one would read as "those pairs were removed".
StatusOr<std::vector<std::string>> ListEntries(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return Status::FromErrno("reading --tls-cert-dir " + path, errno);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;  // readdir reports an error only through errno
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) break;
    if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return Status::FromErrno("reading --tls-cert-dir " + path, err);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

CertificateFolder::CertificateFolder(std::string dir, CertificateFolderLimits limits)
    : dir_(std::move(dir)), limits_(limits) {}

CertificateFolderScan CertificateFolder::Scan(int64_t now) {
  CertificateFolderScan scan;
  StatusOr<std::vector<std::string>> listed = ListEntries(dir_);
  if (!listed.ok()) {
    scan.error = listed.status();
    return scan;
  }
  std::map<std::string, Entry> previous;
  previous.swap(entries_);
  auto was_serving = [&previous](const std::string& name) {
    auto it = previous.find(name);
    return it != previous.end() && it->second.serving != nullptr;
  };
  // Entries already serving first, so that a new pair never takes an old one's room under
  // the cap; then the others in name order.
  std::vector<const std::string*> order;
  for (const std::string& name : *listed) {
    if (was_serving(name)) order.push_back(&name);
  }
  size_t serving = order.size();
  for (const std::string& name : *listed) {
    if (!was_serving(name)) order.push_back(&name);
  }
  for (const std::string* name : order) {
    Entry entry;
    if (auto it = previous.find(*name); it != previous.end()) {
      entry = std::move(it->second);
      previous.erase(it);
    }
    Update(*name, now, &serving, &entry, &scan);
    if (!entry.serving && entry.refusal.empty()) continue;  // gone since the listing
    entries_.emplace(*name, std::move(entry));
  }
  for (const auto& [name, entry] : previous) {
    if (entry.serving) scan.removed.push_back(name);
  }
  scan.changed = !scan.added.empty() || !scan.replaced.empty() || !scan.removed.empty();
  return scan;
}

void CertificateFolder::Update(const std::string& name, int64_t now, size_t* serving_count,
                               Entry* entry, CertificateFolderScan* scan) {
  const std::string previous_refusal = entry->refusal;
  auto refuse = [&](std::string why) {
    entry->refusal = std::move(why);
    if (entry->refusal != previous_refusal) {
      scan->refused.push_back({name, entry->refusal, entry->serving != nullptr});
    }
  };
  const std::string folder = dir_ + "/" + name;
  if (!IsPairName(name)) {
    return refuse(EscapeForMessage(name, 64) +
                  " is not a pair's name: [A-Za-z0-9][A-Za-z0-9_.-]*, at most 253 characters");
  }
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) {
    if (errno == ENOENT) {  // removed since the listing (or a dangling symlink): gone
      if (entry->serving) {
        scan->removed.push_back(name);
        --*serving_count;
      }
      *entry = Entry();
      return;
    }
    return refuse(Status::FromErrno("stat " + folder, errno).message());
  }
  if (!S_ISDIR(st.st_mode)) {
    return refuse(folder + " is not a folder holding " + kCertFile + " and " + kKeyFile);
  }
  const std::string cert_path = folder + "/" + kCertFile;
  const std::string key_path = folder + "/" + kKeyFile;
  const FileStamp cert_stamp = StampOf(cert_path);
  const FileStamp key_stamp = StampOf(key_path);
  const bool tried = !entry->tried_sha256.empty() || !entry->refusal.empty();
  if (tried && !entry->retry && cert_stamp == entry->cert_stamp && key_stamp == entry->key_stamp) {
    return;  // as last tried
  }
  entry->cert_stamp = cert_stamp;
  entry->key_stamp = key_stamp;
  entry->retry = false;
  StatusOr<std::string> cert = ReadFileToString(cert_path, limits_.max_file_bytes);
  if (!cert.ok()) return refuse(cert.status().message());
  StatusOr<std::string> key = ReadFileToString(key_path, limits_.max_file_bytes);
  if (!key.ok()) return refuse(key.status().message());
  // A Secret volume's update renames every file of the volume: only the pairs whose bytes
  // changed are parsed again.
  const std::string sha256 = ossl::Sha256Hex(*cert + std::string(1, '\0') + *key);
  if (entry->serving && entry->serving_sha256 == sha256) {
    entry->tried_sha256 = sha256;
    entry->refusal.clear();  // back to the bytes it serves
    return;
  }
  if (sha256 == entry->tried_sha256) return;  // refused before, as these very bytes
  if (!entry->serving && *serving_count >= limits_.max_pairs) {
    entry->retry = true;  // tried again at every scan, in case a pair left room
    return refuse("over the cap of " + std::to_string(limits_.max_pairs) +
                  " pairs; this one is not served");
  }
  entry->tried_sha256 = sha256;
  StatusOr<std::shared_ptr<const ServingPair>> pair = ParseServingPair(name, *cert, *key, now);
  if (!pair.ok()) return refuse(folder + ": " + pair.status().message());
  if (entry->serving) {
    scan->replaced.push_back(name);
  } else {
    scan->added.push_back(name);
    ++*serving_count;
  }
  entry->serving = std::move(*pair);
  entry->serving_sha256 = sha256;
  entry->refusal.clear();
}

std::vector<std::shared_ptr<const ServingPair>> CertificateFolder::Pairs() const {
  std::vector<std::shared_ptr<const ServingPair>> pairs;
  for (const auto& [name, entry] : entries_) {
    if (entry.serving) pairs.push_back(entry.serving);
  }
  return pairs;
}

std::vector<PairRefusal> CertificateFolder::Refused() const {
  std::vector<PairRefusal> refused;
  for (const auto& [name, entry] : entries_) {
    if (!entry.refusal.empty()) refused.push_back({name, entry.refusal, entry.serving != nullptr});
  }
  return refused;
}

}  // namespace hotfix::service
