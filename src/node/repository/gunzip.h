// Decompressing a gzip'ed index (Packages.gz, primary.xml.gz) to a file with zlib, under the
// reference's 128 MiB cap on what comes out: the index is signed compressed, so corrupt or
// oversized content is an integrity failure, never a partial index.
#pragma once

#include <cstdint>
#include <string>

#include "common/openssl.h"
#include "common/status.h"

namespace hotfix::node::repository {

struct Gunzipped {
  uint64_t size = 0;
  std::string sha256;  // of the decompressed bytes
};

// Every gzip member of `source` (as Go's gzip.Reader reads concatenated members) into `dest`
// (created or truncated, 0600). DataLoss "gzip: ..." for corrupt input, a truncated stream or
// more than max_bytes out; IoError for the files.
StatusOr<Gunzipped> GunzipFile(const std::string& source, const std::string& dest,
                               uint64_t max_bytes);

}  // namespace hotfix::node::repository
