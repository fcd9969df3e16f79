#include "service/rollout/json_message.h"

#include <nlohmann/json.hpp>

namespace hotfix::service {

constexpr size_t kMaxQuotedChars = 64;

std::string QuoteJson(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxQuotedChars) text = text.substr(0, kMaxQuotedChars) + "...";
  return text;
}

std::string Quote(std::string_view text) { return QuoteJson(nlohmann::json(std::string(text))); }

const char* TypeName(const nlohmann::json& value) {
  using json = nlohmann::json;
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::null:
      return "null";
    default:
      return "a number";
  }
}

}  // namespace hotfix::service
