#include "node/repository/packages_index.h"

#include <cstring>
#include <memory>
#include <utility>

#include "common/text.h"

namespace hotfix::node::repository {
namespace {

constexpr size_t kBlockBytes = 64 * 1024;
constexpr size_t kMaxEchoedBytes = 256;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Lines of a stream, read in blocks: a line is a view into the block when it lies within one,
// else into a buffer that never holds more than kMaxPackagesLineBytes.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in), block_(new char[kBlockBytes]) {}

  // true and the line (no "\n", no "\r" before it); false at the end; or the error.
  StatusOr<bool> Next(std::string_view* line) {
    if (carry_used_) {
      carry_.clear();
      carry_used_ = false;
    }
    for (;;) {
      if (pos_ < len_) {
        const char* start = block_.get() + pos_;
        size_t avail = len_ - pos_;
        const void* nl = std::memchr(start, '\n', avail);
        if (nl != nullptr) {
          size_t n = static_cast<const char*>(nl) - start;
          pos_ += n + 1;
          if (carry_.size() + n > kMaxPackagesLineBytes) return TooLong();
          if (carry_.empty()) {
            *line = std::string_view(start, n);
          } else {
            carry_.append(start, n);
            *line = carry_;
            carry_used_ = true;
          }
          return Strip(line);
        }
        if (carry_.size() + avail > kMaxPackagesLineBytes) return TooLong();
        carry_.append(start, avail);
        pos_ = len_;
      }
      if (eof_) {
        if (carry_.empty()) return false;
        *line = carry_;  // the last line, without a "\n"
        carry_used_ = true;
        return Strip(line);
      }
      in_.read(block_.get(), kBlockBytes);
      len_ = static_cast<size_t>(in_.gcount());
      pos_ = 0;
      if (in_.bad()) return Status::IoError("reading the Packages index failed");
      if (len_ < kBlockBytes) eof_ = true;
    }
  }

 private:
  static bool Strip(std::string_view* line) {
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    return true;
  }
  static Status TooLong() {
    return Status::DataLoss("Packages index has a line longer than " +
                            std::to_string(kMaxPackagesLineBytes) + " bytes");
  }

  std::istream& in_;
  std::unique_ptr<char[]> block_;
  size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
  std::string carry_;
  bool carry_used_ = false;
};

// The fields of one stanza this reader needs; everything else is dropped as it is read. Reset
// keeps the strings' buffers: a 128 MiB index has hundreds of thousands of stanzas.
struct Field {
  std::string value;
  bool seen = false;
};

struct Fields {
  Field package, version, architecture, filename, sha256;
  bool any = false;

  void Reset() {
    for (Field* f : {&package, &version, &architecture, &filename, &sha256}) {
      f->value.clear();
      f->seen = false;
    }
    any = false;
  }
  void Take(std::string_view key, std::string_view value) {
    any = true;
    Field* field = nullptr;
    if (EqualsIgnoreCase(key, "Package")) {
      field = &package;
    } else if (EqualsIgnoreCase(key, "Version")) {
      field = &version;
    } else if (EqualsIgnoreCase(key, "Architecture")) {
      field = &architecture;
    } else if (EqualsIgnoreCase(key, "Filename")) {
      field = &filename;
    } else if (EqualsIgnoreCase(key, "SHA256")) {
      field = &sha256;
    }
    if (field == nullptr || field->seen) return;
    field->seen = true;
    field->value.assign(value);
  }
  bool Matches(const DebPackageQuery& q) const {
    return package.seen && version.seen && architecture.seen && package.value == q.package &&
           version.value == q.version && architecture.value == q.architecture;
  }
};

std::string Describe(const DebStanza& s) {
  return EscapeForMessage(s.package, kMaxEchoedBytes) + " " +
         EscapeForMessage(s.version, kMaxEchoedBytes) + " " +
         EscapeForMessage(s.architecture, kMaxEchoedBytes);
}

}  // namespace

StatusOr<std::optional<DebStanza>> FindPackageStanza(std::istream& in,
                                                     const DebPackageQuery& query) {
  // A stream that failed before we read (a file that did not open) is an error, not an
  // empty index that would send the node to the package manager for the wrong reason.
  if (in.fail() && !in.eof()) return Status::IoError("the Packages index stream is not readable");
  LineReader reader(in);
  Fields fields;
  auto match = [&]() -> std::optional<DebStanza> {
    if (!fields.any || !fields.Matches(query)) return std::nullopt;
    return DebStanza{fields.filename.value, fields.sha256.value, fields.package.value,
                     fields.version.value, fields.architecture.value};
  };
  for (;;) {
    std::string_view line;
    StatusOr<bool> more = reader.Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (TrimBlanks(line).empty()) {
      if (std::optional<DebStanza> found = match()) return found;
      fields.Reset();
      continue;
    }
    if (IsAsciiBlank(line.front())) continue;  // a continuation: no field this reader needs has one
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    fields.Take(TrimBlanks(line.substr(0, colon)), TrimBlanks(line.substr(colon + 1)));
  }
  return match();
}

Status CheckDebStanza(const DebStanza& stanza, std::string_view expected_filename) {
  if (stanza.filename != expected_filename) {
    return Status::DataLoss("Packages stanza for " + Describe(stanza) + " has Filename \"" +
                            EscapeForMessage(stanza.filename, kMaxEchoedBytes) + "\", want \"" +
                            EscapeForMessage(expected_filename, kMaxEchoedBytes) + "\"");
  }
  bool hex = stanza.sha256.size() == 64;
  for (char c : stanza.sha256) hex = hex && HexDigitValue(c) >= 0;
  if (!hex)
    return Status::DataLoss("Packages stanza for " + Describe(stanza) + " has no valid SHA256");
  return Status::Ok();
}

}  // namespace hotfix::node::repository
