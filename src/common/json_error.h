// nlohmann::json's exception texts start with "[json.exception.parse_error.101] "; operators
// need only the rest.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace hotfix {

inline std::string JsonErrorText(const std::exception& e) {
  std::string_view what = e.what();
  const size_t bracket = what.find("] ");
  if (bracket != std::string_view::npos) what.remove_prefix(bracket + 2);
  return std::string(what);
}

}  // namespace hotfix
