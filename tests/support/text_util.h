// Whole files and JSON lines, the two ways the tests read what a program wrote.
//
//   std::string pointer = ReadFile(dir.File("hotfix.json"));
//   for (const nlohmann::json& line : JsonLines(process.Stderr(), NonJsonLines::kSkip)) ...
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace hotfix::testsupport {

// The whole file, bytes as they are; empty if it does not exist or cannot be read.
std::string ReadFile(const std::filesystem::path& path);
// The same for a file that must be there (a tool's input): throws std::runtime_error naming
// the path when it cannot be opened.
std::string ReadFileOrThrow(const std::filesystem::path& path);

enum class NonJsonLines {
  // A line that is not JSON becomes a discarded value (is_discarded()), one value per line,
  // so that a test can assert that every line parsed.
  kDiscarded,
  // Only the lines holding a JSON object are returned (a service's stderr also carries
  // libgrpc's own log lines).
  kSkip,
};

// One value per line of `text`.
std::vector<nlohmann::json> JsonLines(std::string_view text,
                                      NonJsonLines non_json = NonJsonLines::kDiscarded);

}  // namespace hotfix::testsupport
