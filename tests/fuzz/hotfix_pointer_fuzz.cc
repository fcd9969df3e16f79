// The pointer file (written by boothook/CSE, read back by check-hotfix and download-hotfix) and
// the served config (bytes from the service): ParseHotfixPointer, DecodeLenientHotfixes and
// what is computed from them.
//
// Property: a pointer that parses serialises to JSON that parses back to the same pointer, and
// serialising is a fixed point (what staging writes is what the next run reads).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/log.h"
#include "fuzz_util.h"
#include "node/go/go_utf8.h"
#include "node/host/hotfix_pointer.h"

using namespace hotfix::node;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  auto pointer = ParseHotfixPointer(input);
  if (pointer.ok()) {
    const std::string json = SerializeHotfixPointer(*pointer);
    auto again = ParseHotfixPointer(json);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *pointer);
    FUZZ_CHECK(SerializeHotfixPointer(*again) == json);
    ResolveVersion(*pointer, "202604.01.0", hotfix::NullLogger());
  }

  auto lenient = DecodeLenientHotfixes(input);
  if (lenient.ok()) {
    // The cold-start map is staged as a pointer's hotfixes: it must survive the same trip.
    HotfixPointer staged;
    staged.hotfixes = *lenient;
    auto back = ParseHotfixPointer(SerializeHotfixPointer(staged));
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->hotfixes == *lenient);
  }

  // Version strings come from the same documents.
  static_cast<void>(HotfixBaseFromVersion(input));
  ReplaceInvalidUtf8(input);
  return 0;
}
