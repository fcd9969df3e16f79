// IMDS's answer, as bytes from the peer on 169.254.169.254:80 (anything on the node's network
// path can answer there): the HTTP/1.1 response (wire::ReadHttpResponse: Beast, with IMDS's
// caps), the status check, and the attested document's JSON (ReadAttestedResponse: the reader
// options and checks FetchOnce applies to its TCP connection).
//
// Property: the outcome (the token, or the kind of failure) does not depend on how the bytes
// are split into reads; a token is never empty.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/deadline.h"
#include "fuzz_util.h"
#include "node/call/imds.h"
#include "wire/memory_stream.h"

using namespace hotfix;

namespace {

StatusOr<Secret> Read(std::string input, size_t max_chunk) {
  static const std::atomic<bool> kNotCancelled{false};
  wire::ScriptedByteStream stream(std::move(input), max_chunk);
  const Deadline deadline = Deadline::After(std::chrono::seconds(60));
  return node::ReadAttestedResponse(stream, deadline, deadline, kNotCancelled,
                                    "GET http://169.254.169.254/metadata/attested/document");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);

  auto whole = Read(input, SIZE_MAX);
  auto split = Read(input, 1 + size % 61);
  if (std::getenv("FUZZ_VERBOSE") != nullptr) {  // when reproducing a crash by hand
    std::fprintf(stderr, "whole: %s\nsplit (%zu-byte reads): %s\n",
                 whole.status().ToString().c_str(), 1 + size % 61,
                 split.status().ToString().c_str());
  }
  FUZZ_CHECK(whole.ok() == split.ok());
  if (whole.ok()) {
    FUZZ_CHECK(!whole->reveal().empty());
    FUZZ_CHECK(whole->reveal() == split->reveal());
  } else {
    // Beast's text for a malformed response may depend on where reads ended ("bad field" or
    // "partial message" for the same truncated header); the kind of failure may not.
    FUZZ_CHECK(whole.status().code() == split.status().code());
  }

  // The body alone, as the JSON decoder sees it.
  static_cast<void>(node::ParseAttestedDocument(input));
  return 0;
}
