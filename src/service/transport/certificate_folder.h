// The --tls-cert-dir folder: the serving pairs of a service that answers many clusters, one
// subfolder per pair holding tls.crt (PEM chain, leaf first) and tls.key, the two keys of a
// kubernetes.io/tls Secret. So each cluster's Secret (cert-manager writes one per Certificate)
// lands as DIR/<name>/ from a projected volume's items, or from a Secret volume mounted at
// DIR/<name>, and on a host `kubectl get secret -o jsonpath` or cert-manager's files copy in
// as they are (docs/OPERATIONS.md, "Many clusters, one service").
//
//   CertificateFolder folder(dir);
//   CertificateFolderScan scan = folder.Scan(time(nullptr));   // at start and every refresh
//   if (scan.changed) ... CertificateIndex index(folder.Pairs());
//
// A pair is re-read only when one of its files changed (inode, size, modification time: a
// Secret volume's update renames whole folders) and parsed again only when their bytes did.
// A pair that does not load (half-written, mismatched, expired, over a cap) never replaces
// the one its name serves: that one stays, and the refusal is reported until the files are
// fixed. Not thread-safe: one caller (the event loop that checks the files).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/status.h"
#include "service/transport/server_certificates.h"

namespace hotfix::service {

struct CertificateFolderLimits {
  // Pairs served at most: each costs its certificates and key in memory (a few KiB) and two
  // stat(2) calls per --refresh-interval on an event loop. A Kubernetes Secret holds 1 MiB, a
  // projected volume's sources fit in a pod spec: a thousand clusters is more than one
  // Deployment's volume will hold.
  size_t max_pairs = 1024;
  // Each of tls.crt and tls.key: a leaf, two intermediates and a key are under 10 KiB.
  size_t max_file_bytes = 64 * 1024;
};

// Why one pair is refused now.
struct PairRefusal {
  std::string name;
  std::string error;
  bool kept_previous = false;  // the name still serves the pair it had
};

// What a scan found, for the log and the metrics.
struct CertificateFolderScan {
  Status error;          // the folder itself could not be listed: nothing changed
  bool changed = false;  // the pairs served differ from before the scan
  std::vector<std::string> added, replaced, removed;  // pair names
  // Refusals this scan found new (a refusal already reported is not reported again).
  std::vector<PairRefusal> refused;
};

class CertificateFolder {
 public:
  static constexpr char kCertFile[] = "tls.crt";
  static constexpr char kKeyFile[] = "tls.key";

  explicit CertificateFolder(std::string dir, CertificateFolderLimits limits = {});

  // Lists the folder and brings every pair up to date; `now` (Unix seconds) decides expiry.
  // Entries whose name starts with a dot are never pairs (a projected volume's ..data and
  // ..2026_... folders); every other entry must be a folder named [A-Za-z0-9][A-Za-z0-9_.-]*
  // (at most 253 characters) holding the two files.
  CertificateFolderScan Scan(int64_t now);

  // The pairs served now, by name.
  std::vector<std::shared_ptr<const ServingPair>> Pairs() const;
  // Entries refused as they are now (kept out, or still serving their previous pair).
  std::vector<PairRefusal> Refused() const;
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    FileStamp cert_stamp, key_stamp;             // of the files last tried
    std::string tried_sha256;                    // of the bytes last tried
    std::shared_ptr<const ServingPair> serving;  // null: none yet
    std::string serving_sha256;                  // of the bytes `serving` was parsed from
    std::string refusal;  // why the entry as it is now is refused; empty: `serving` is it
    bool retry = false;   // refused for a cause outside its files (the cap): try again
  };
  // Brings one listed entry up to date, noting in `scan` what changed; serving_count is the
  // pairs served so far (the cap's count).
  void Update(const std::string& name, int64_t now, size_t* serving_count, Entry* entry,
              CertificateFolderScan* scan);

  std::string dir_;
  CertificateFolderLimits limits_;
  std::map<std::string, Entry> entries_;
};

}  // namespace hotfix::service
