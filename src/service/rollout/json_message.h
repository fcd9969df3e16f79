// JSON values in the messages that name what is wrong with a component file (the store's
// and the rollouts' validation): quoted, shortened, and typed in words.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace hotfix::service {

// A JSON-quoted copy of value, cut at 64 characters ("..." after): the text comes from a
// file an operator will look for, and must not flood the log.
std::string QuoteJson(const nlohmann::json& value);
std::string Quote(std::string_view text);  // the same for a string

// "an object", "an array", "a string", "a boolean", "null" or "a number".
const char* TypeName(const nlohmann::json& value);

}  // namespace hotfix::service
