// nodecustomdata.yml (download-hotfix's scripts hotfix): the YAML document as
// ParseNodeCustomData reads it, then each entry's checks and content decoding
// (PrepareWriteFile: octal permissions, owner, base64, gzip); never the file writes. The first
// byte chooses:
//  - 0..127: the rest is the YAML document;
//  - 128..255: the rest is one entry's content, decoded as gzip (odd) or base64 (even), so that
//    the decoders see arbitrary bytes without first passing through YAML.
//
// Properties: a prepared file has permission bits only; a plain entry's data is its content.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "node/host/node_custom_data.h"

using namespace hotfix::node;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  if (data[0] < 128) {
    auto entries = ParseNodeCustomData(rest);
    if (!entries.ok()) return 0;
    for (size_t i = 0; i < entries->size(); ++i) {
      const WriteFileEntry& entry = (*entries)[i];
      auto file = PrepareWriteFile(entry, i);
      if (!file.ok()) continue;
      FUZZ_CHECK((file->mode & ~07777u) == 0);
      FUZZ_CHECK(file->path == entry.path);
      if (entry.encoding.empty()) FUZZ_CHECK(file->data == entry.content);
    }
    return 0;
  }

  WriteFileEntry entry;
  entry.path = "/opt/azure/containers/fuzz";
  entry.encoding = (data[0] & 1) ? "gzip" : "base64";
  entry.content = std::string(rest);
  auto file = PrepareWriteFile(entry, 0);
  if (file.ok()) FUZZ_CHECK(file->mode == 0644);
  return 0;
}
