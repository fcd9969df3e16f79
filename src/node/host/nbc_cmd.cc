#include "node/host/nbc_cmd.h"

#include "common/text.h"

namespace hotfix::node {
namespace {

// CR is deliberately not a delimiter: the reference treats it as part of a value.
bool IsDelimiter(char c) { return c == ' ' || c == '\t' || c == '\n' || c == ';'; }

bool IsKeyStart(char c) { return (c >= 'A' && c <= 'Z') || c == '_'; }

bool IsKeyChar(char c) { return IsKeyStart(c) || IsAsciiDigit(c); }

// Index just past the quoted run that opens at `open` (a quote byte); an unterminated quote
// runs to the end of the input.
size_t SkipQuoted(std::string_view s, size_t open) {
  size_t close = s.find(s[open], open + 1);
  return close == std::string_view::npos ? s.size() : close + 1;
}

// Skips the rest of a token that is not an assignment. Quoted runs count as part of the token,
// so `bash -c "A=1 B=2"` never yields assignments.
size_t SkipToken(std::string_view s, size_t i) {
  while (i < s.size() && !IsDelimiter(s[i])) {
    i = (s[i] == '"' || s[i] == '\'') ? SkipQuoted(s, i) : i + 1;
  }
  return i;
}

// Whether `[A-Z_][A-Z0-9_]*=` starts at i: how the reference splits `A="x"B="y"`.
bool StartsAssignment(std::string_view s, size_t i) {
  if (i >= s.size() || !IsKeyStart(s[i])) return false;
  size_t j = i + 1;
  while (j < s.size() && IsKeyChar(s[j])) ++j;
  return j < s.size() && s[j] == '=';
}

// Reads the value that starts at i into *value; returns where the scan resumes. Quoted segments
// are literal (no escapes, quotes removed) and concatenate with unquoted ones.
size_t ParseValue(std::string_view s, size_t i, std::string* value) {
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"' || c == '\'') {
      size_t close = s.find(c, i + 1);
      if (close == std::string_view::npos) {  // unterminated: delimiters included, to the end
        value->append(s.substr(i + 1));
        return s.size();
      }
      value->append(s.substr(i + 1, close - (i + 1)));
      i = close + 1;
    } else if (IsDelimiter(c) || StartsAssignment(s, i)) {
      return i;
    } else {
      value->push_back(c);
      ++i;
    }
  }
  return i;
}

}  // namespace

std::map<std::string, std::string> ParseEnvVarsFromNbcCmd(std::string_view content) {
  std::map<std::string, std::string> vars;
  size_t i = 0;
  const size_t n = content.size();
  while (i < n) {
    while (i < n && IsDelimiter(content[i])) ++i;
    if (i >= n) break;
    if (!StartsAssignment(content, i)) {
      i = SkipToken(content, i);
      continue;
    }
    const size_t equals = content.find('=', i);
    std::string key(content.substr(i, equals - i));
    std::string value;
    i = ParseValue(content, equals + 1, &value);
    vars[std::move(key)] = std::move(value);  // a repeated key: the last one wins
  }
  return vars;
}

}  // namespace hotfix::node
