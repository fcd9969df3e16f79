#include "text_util.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace hotfix::testsupport {

namespace {

std::string ReadAll(std::ifstream& in) {
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return in ? ReadAll(in) : std::string();
}

std::string ReadFileOrThrow(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return ReadAll(in);
}

std::vector<nlohmann::json> JsonLines(std::string_view text, NonJsonLines non_json) {
  std::vector<nlohmann::json> values;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (non_json == NonJsonLines::kSkip && !value.is_object()) continue;
    values.push_back(std::move(value));
  }
  return values;
}

}  // namespace hotfix::testsupport
