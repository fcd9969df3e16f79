// --prometheus-selector (ParsePrometheusSelector, src/service/ops/prometheus_client.cc): a
// hand-written reader of PromQL label matchers, whose output goes inside every query's braces.
//
// Input: the flag's bytes.
//
// Properties:
// - it either fails or returns matchers that parse again to themselves (a fixed point), so what
//   is sent is what was checked;
// - the output has no byte below 0x20 and no brace outside a quoted value: it cannot close the
//   selector and start another expression.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "service/ops/prometheus_client.h"

using namespace hotfix;
using namespace hotfix::service;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  StatusOr<std::string> parsed = ParsePrometheusSelector(text);
  if (!parsed.ok()) return 0;
  StatusOr<std::string> again = ParsePrometheusSelector(*parsed);
  FUZZ_CHECK(again.ok() && *again == *parsed);
  bool quoted = false;
  for (size_t i = 0; i < parsed->size(); ++i) {
    const char c = (*parsed)[i];
    FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20);
    if (quoted && c == '\\') {
      ++i;
      continue;
    }
    if (c == '"') quoted = !quoted;
    if (!quoted) FUZZ_CHECK(c != '{' && c != '}' && c != '(' && c != ')');
  }
  FUZZ_CHECK(!quoted);
  return 0;
}
