#include "node/go/go_json.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/json_error.h"
#include "common/text.h"
#include "node/go/go_utf8.h"

namespace hotfix::node {
namespace {

using Json = nlohmann::json;

// Go's encoding/json refuses documents nested deeper than this.
constexpr size_t kMaxNestingDepth = 10000;

unsigned char At(std::string_view s, size_t i) { return static_cast<unsigned char>(s[i]); }

// ---------------------------------------------------------------------------------------------
// Making nlohmann accept what Go's decoder accepts.

// The code unit of a "\uXXXX" escape at s[i], or -1 when there is none.
int32_t EscapedCodeUnit(std::string_view s, size_t i) {
  if (i + 6 > s.size() || s[i] != '\\' || s[i + 1] != 'u') return -1;
  int32_t unit = 0;
  for (size_t k = i + 2; k < i + 6; ++k) {
    const int digit = HexDigitValue(s[k]);
    if (digit < 0) return -1;
    unit = unit * 16 + digit;
  }
  return unit;
}

bool IsHighSurrogate(int32_t u) { return u >= 0xD800 && u <= 0xDBFF; }
bool IsLowSurrogate(int32_t u) { return u >= 0xDC00 && u <= 0xDFFF; }

// Copies the escape sequence at s[i] (a backslash inside a string); returns the next index.
// Go decodes an unpaired surrogate escape as U+FFFD where nlohmann would reject the document.
size_t CopyEscape(std::string_view s, size_t i, std::string* out) {
  const int32_t unit = EscapedCodeUnit(s, i);
  if (unit < 0) {  // a short escape, or a malformed one that both decoders reject
    out->push_back('\\');
    if (i + 1 < s.size() && At(s, i + 1) < 0x80) {
      out->push_back(s[i + 1]);
      return i + 2;
    }
    return i + 1;
  }
  if (IsHighSurrogate(unit) && IsLowSurrogate(EscapedCodeUnit(s, i + 6))) {
    out->append(s.substr(i, 12));
    return i + 12;
  }
  const bool unpaired = IsHighSurrogate(unit) || IsLowSurrogate(unit);
  out->append(unpaired ? std::string_view("\\ufffd") : s.substr(i, 6));
  return i + 6;
}

// Whether `s` is exactly a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && IsAsciiDigit(s[i])) ++i;
    return i > from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

// Copies the number-like run at in[i] (outside strings); returns the next index. nlohmann
// rejects a number that overflows a double (1e400) while Go only checks its syntax: no field of
// ours is numeric, so any such number is either skipped or a type error, and 0 gives the same.
size_t CopyNumber(std::string_view in, size_t i, std::string* out) {
  size_t end = i;
  auto in_number = [](char c) {
    return IsAsciiDigit(c) || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E';
  };
  while (end < in.size() && in_number(in[end])) ++end;
  const std::string token(in.substr(i, end - i));
  const bool overflows = IsJsonNumber(token) && std::isinf(std::strtod(token.c_str(), nullptr));
  out->append(overflows ? "0" : token);
  return end;
}

// Go's decoder replaces each invalid UTF-8 byte, and each unpaired surrogate escape, with U+FFFD,
// and accepts numbers too large for a double; nlohmann rejects all three. Rewriting them first
// makes the decoders agree. Outside strings invalid bytes stay a syntax error, as in Go.
std::string RepairLikeGoDecoder(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  bool in_string = false;
  for (size_t i = 0; i < in.size();) {
    const char c = in[i];
    if (At(in, i) >= 0x80) {
      GoRune r = DecodeRuneLikeGo(in, i);
      out.append(r.size == 1 ? std::string_view(kReplacementChar) : in.substr(i, r.size));
      i += r.size;
    } else if (in_string && c == '\\') {
      i = CopyEscape(in, i, &out);
    } else if (!in_string && (c == '-' || IsAsciiDigit(c))) {
      i = CopyNumber(in, i, &out);
    } else {
      if (c == '"') in_string = !in_string;
      out.push_back(c);
      ++i;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// encoding/json into the reference's structs, as an nlohmann SAX consumer.

// Go 1.21+ foldName, restricted to what can equal an ASCII field name: ASCII upper-cased, plus
// the four non-ASCII runes whose upper(lower(r)) is ASCII (ſ -> S, K-sign -> K, İ and ı -> I).
std::string GoFoldName(std::string_view key) {
  std::string out;
  for (size_t i = 0; i < key.size();) {
    GoRune r = DecodeRuneLikeGo(key, i);
    uint32_t folded = r.code;
    if (r.code >= 'a' && r.code <= 'z') folded = r.code - ('a' - 'A');
    if (r.code == 0x17F) folded = 'S';
    if (r.code == 0x212A) folded = 'K';
    if (r.code == 0x130 || r.code == 0x131) folded = 'I';
    if (folded < 0x80) {
      out.push_back(static_cast<char>(folded));
    } else {
      out.append(key.substr(i, r.size));
    }
    i += r.size;
  }
  return out;
}

// Which Go struct the document decodes into; it only changes which keys are fields and the
// type names in error texts.
struct GoTarget {
  bool has_version_fields;
  const char* struct_name;  // for "Go struct field <name>.<field>"
  const char* type_name;    // for "Go value of type <type>"
};
constexpr GoTarget kPointerTarget = {true, "hotfixConfig", "main.hotfixConfig"};
constexpr GoTarget kLenientTarget = {
    false, "", "struct { Hotfixes map[string]string \"json:\\\"hotfixes\\\"\" }"};

class GoStructDecoder {
 public:
  explicit GoStructDecoder(const GoTarget& target) : target_(target) {}

  bool null() { return Scalar("null", nullptr); }
  bool boolean(bool) { return Scalar("bool", nullptr); }
  bool number_integer(Json::number_integer_t) { return Scalar("number", nullptr); }
  bool number_unsigned(Json::number_unsigned_t) { return Scalar("number", nullptr); }
  bool number_float(Json::number_float_t, const std::string&) { return Scalar("number", nullptr); }
  bool string(std::string& s) { return Scalar("string", &s); }
  bool binary(Json::binary_t&) { return Scalar("string", nullptr); }  // not produced by JSON
  bool start_object(std::size_t) { return Open(/*object=*/true); }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(/*object=*/false); }
  bool end_array() { return Close(); }
  bool key(std::string& k);
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e);

  // Go checks the syntax of the whole document before decoding, so a syntax error wins over
  // a type error; of several type errors the first is reported.
  Status Result() const { return syntax_error_.ok() ? type_error_ : syntax_error_; }
  const GoHotfixConfig& decoded() const { return pointer_; }

 private:
  // What the next value is decoded into.
  enum class Slot { kTop, kVersion, kScriptsVersion, kHotfixes, kMapValue, kIgnored };
  // The containers we are inside; values inside kSkipped ones are discarded.
  enum class Frame { kStruct, kMap, kSkipped };

  bool Scalar(const char* kind, const std::string* text);
  bool Open(bool object);
  bool Close() {
    frames_.pop_back();
    return true;
  }
  bool Skipping() const { return !frames_.empty() && frames_.back() == Frame::kSkipped; }
  Slot FieldFor(std::string_view key) const;
  void TypeError(const char* kind);

  const GoTarget& target_;
  std::vector<Frame> frames_;
  Slot slot_ = Slot::kTop;
  std::string map_key_;
  GoHotfixConfig pointer_;
  Status type_error_;
  Status syntax_error_;
};

GoStructDecoder::Slot GoStructDecoder::FieldFor(std::string_view key) const {
  const std::string folded = GoFoldName(key);
  if (folded == "HOTFIXES") return Slot::kHotfixes;
  if (target_.has_version_fields && folded == "VERSION") return Slot::kVersion;
  if (target_.has_version_fields && folded == "SCRIPTS_VERSION") return Slot::kScriptsVersion;
  return Slot::kIgnored;
}

void GoStructDecoder::TypeError(const char* kind) {
  if (!type_error_.ok()) return;
  std::string into;
  switch (slot_) {
    case Slot::kTop:
      into = std::string("Go value of type ") + target_.type_name;
      break;
    case Slot::kVersion:
      into = std::string("Go struct field ") + target_.struct_name + ".version of type string";
      break;
    case Slot::kScriptsVersion:
      into =
          std::string("Go struct field ") + target_.struct_name + ".scripts_version of type string";
      break;
    case Slot::kHotfixes:
      into = std::string("Go struct field ") + target_.struct_name +
             ".hotfixes of type map[string]string";
      break;
    case Slot::kMapValue:
      into = std::string("Go struct field ") + target_.struct_name + ".hotfixes of type string";
      break;
    case Slot::kIgnored:
      return;
  }
  type_error_ =
      Status::InvalidArgument(std::string("json: cannot unmarshal ") + kind + " into " + into);
}

bool GoStructDecoder::Scalar(const char* kind, const std::string* text) {
  if (Skipping()) return true;
  const bool is_null = text == nullptr && std::string_view(kind) == "null";
  switch (slot_) {
    case Slot::kVersion:
    case Slot::kScriptsVersion: {
      std::string& field = slot_ == Slot::kVersion ? pointer_.version : pointer_.scripts_version;
      if (text != nullptr) {
        field = *text;
      } else if (!is_null) {  // null leaves a string untouched
        TypeError(kind);
      }
      break;
    }
    case Slot::kHotfixes:
      if (is_null) {
        pointer_.hotfixes.clear();  // null sets a map to nil
      } else {
        TypeError(kind);
      }
      break;
    case Slot::kMapValue:
      if (text != nullptr || is_null) {
        pointer_.hotfixes[map_key_] = text != nullptr ? *text : "";  // null: the zero string
      } else {
        TypeError(kind);
      }
      break;
    case Slot::kTop:
      if (!is_null) TypeError(kind);  // top-level null leaves the zero value
      break;
    case Slot::kIgnored:
      break;
  }
  return true;
}

bool GoStructDecoder::Open(bool object) {
  if (frames_.size() >= kMaxNestingDepth) {
    syntax_error_ = Status::InvalidArgument("exceeded max depth");
    return false;
  }
  Frame frame = Frame::kSkipped;
  if (!Skipping()) {
    if (object && slot_ == Slot::kTop) {
      frame = Frame::kStruct;
    } else if (object && slot_ == Slot::kHotfixes) {
      frame = Frame::kMap;  // a repeated "hotfixes" adds to the map, as Go does
    } else {
      TypeError(object ? "object" : "array");
    }
  }
  frames_.push_back(frame);
  return true;
}

bool GoStructDecoder::key(std::string& k) {
  if (frames_.back() == Frame::kStruct) {
    slot_ = FieldFor(k);
  } else if (frames_.back() == Frame::kMap) {
    slot_ = Slot::kMapValue;
    map_key_ = k;
  }
  return true;
}

bool GoStructDecoder::parse_error(std::size_t, const std::string&,
                                  const nlohmann::detail::exception& e) {
  syntax_error_ = Status::InvalidArgument(JsonErrorText(e));
  return false;
}

}  // namespace

StatusOr<GoHotfixConfig> DecodeLikeGo(std::string_view json, GoHotfixStruct into) {
  GoStructDecoder decoder(into == GoHotfixStruct::kHotfixConfig ? kPointerTarget : kLenientTarget);
  const std::string text = RepairLikeGoDecoder(json);
  try {
    Json::sax_parse(text, &decoder);
  } catch (const Json::exception& e) {  // not expected from sax_parse; never let it escape
    return Status::InvalidArgument(e.what());
  }
  Status status = decoder.Result();
  if (!status.ok()) return status;
  return decoder.decoded();
}

std::string EscapeJsonLikeGo(std::string_view compact_json) {
  std::string out;
  out.reserve(compact_json.size());
  for (size_t i = 0; i < compact_json.size(); ++i) {
    const char c = compact_json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (compact_json.substr(i, 3) == "\xE2\x80\xA8") {
      out += "\\u2028";
      i += 2;
    } else if (compact_json.substr(i, 3) == "\xE2\x80\xA9") {
      out += "\\u2029";
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace hotfix::node
