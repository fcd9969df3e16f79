// What every fuzz target shares: a property check that aborts (libFuzzer keeps the input as a
// crash) with a message naming the property, instead of assert(), which NDEBUG would drop.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// The fields of an input separated by NUL bytes (at least one, maybe empty), as the call
// targets read their callers' strings.
inline std::vector<std::string_view> SplitAtNul(std::string_view input) {
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    const size_t nul = input.find('\0', start);
    fields.push_back(input.substr(start, nul - start));
    if (nul == std::string_view::npos) return fields;
    start = nul + 1;
  }
}

// 64 lower-case hex digits: a SHA-256 as the repository parsers return it.
inline bool IsLowerHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}
