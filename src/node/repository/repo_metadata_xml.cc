#include "node/repository/repo_metadata_xml.h"

#include <expat.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "common/text.h"

namespace hotfix::node::repository {
namespace {

// Expat reports a namespaced name as "<uri><separator><local>". A space cannot be part of a
// namespace URI, so it never makes two names equal that are not.
constexpr XML_Char kNsSeparator = ' ';
constexpr std::string_view kRepoNs = "http://linux.duke.edu/metadata/repo ";
constexpr std::string_view kCommonNs = "http://linux.duke.edu/metadata/common ";
constexpr size_t kReadBlockBytes = 64 * 1024;
constexpr size_t kMaxEchoedBytes = 256;

bool IsXmlSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view TrimXmlSpace(std::string_view s) {
  while (!s.empty() && IsXmlSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsXmlSpace(s.back())) s.remove_suffix(1);
  return s;
}

// name is "<ns><local>" with ns one of the constants above (which end with the separator).
bool IsElement(std::string_view name, std::string_view ns, std::string_view local) {
  return name.size() == ns.size() + local.size() && name.starts_with(ns) && name.ends_with(local);
}

// An attribute without a prefix has no namespace: expat reports its bare name.
std::optional<std::string_view> Attribute(const XML_Char** attrs, std::string_view name) {
  for (const XML_Char** a = attrs; a[0] != nullptr; a += 2) {
    if (name == a[0]) return std::string_view(a[1]);
  }
  return std::nullopt;
}

bool IsSha256Type(std::string_view type) { return AsciiLower(type) == "sha256"; }

// 64 hex digits of either case, lower-cased; nullopt for anything else.
std::optional<std::string> Sha256Hex(std::string_view s) {
  if (s.size() != 64) return std::nullopt;
  for (char c : s) {
    if (HexDigitValue(c) < 0) return std::nullopt;
  }
  return AsciiLower(s);
}

std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || !IsAsciiDigit(s.front())) return std::nullopt;
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return value;
}

// Text collected for one element, at most kMaxXmlTextBytes; more marks it invalid instead
// of growing.
struct Text {
  std::string value;
  bool overflowed = false;
  void Append(std::string_view s) {
    if (overflowed) return;
    if (value.size() + s.size() > kMaxXmlTextBytes) {
      overflowed = true;
      value.clear();
      return;
    }
    value.append(s);
  }
  void Clear() {
    value.clear();
    overflowed = false;
  }
  // The trimmed text, nullopt when it overflowed.
  std::optional<std::string_view> Get() const {
    if (overflowed) return std::nullopt;
    return TrimXmlSpace(value);
  }
};

struct ParserFree {
  void operator()(XML_ParserStruct* p) const { XML_ParserFree(p); }
};

// One expat parser with this file's rules: namespaces on, no DTD (and so no entities; expat's
// own amplification limits stay at their defaults too), a bound on depth and on markup expat
// would buffer whole. Subclasses see elements at a depth
// (the root is 1) and the text of the one they asked to capture.
class Reader {
 public:
  explicit Reader(std::string what) : what_(std::move(what)) {
    parser_.reset(XML_ParserCreateNS(nullptr, kNsSeparator));
    if (parser_ == nullptr) return;
    XML_SetUserData(parser_.get(), this);
    XML_SetElementHandler(parser_.get(), &Reader::Start, &Reader::End);
    XML_SetCharacterDataHandler(parser_.get(), &Reader::Chars);
    XML_SetCommentHandler(parser_.get(), &Reader::Comment);
    XML_SetProcessingInstructionHandler(parser_.get(), &Reader::Pi);
    // A DOCTYPE stops the parse before its internal subset is read, so no entity is ever
    // declared; the entity handler is the second lock on the same door.
    XML_SetStartDoctypeDeclHandler(parser_.get(), &Reader::Doctype);
    XML_SetEntityDeclHandler(parser_.get(), &Reader::Entity);
    XML_SetParamEntityParsing(parser_.get(), XML_PARAM_ENTITY_PARSING_NEVER);
  }
  virtual ~Reader() = default;
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Feeds bytes; final with the last (possibly empty) piece. An error ends the document.
  Status Feed(const char* data, size_t len, bool final) {
    if (parser_ == nullptr) return Status::Internal("creating an XML parser failed");
    if (!error_.ok() || done_) return error_;
    while (len > 0 || final) {
      // XML_Parse takes an int; feed a large view in pieces.
      size_t piece = std::min<size_t>(len, kReadBlockBytes);
      bool last = final && piece == len;
      fed_ += piece;
      XML_Status status = XML_Parse(parser_.get(), data, static_cast<int>(piece), last);
      if (!error_.ok() || done_) return error_;
      if (status != XML_STATUS_OK) {
        return Status::DataLoss(
            what_ + " is not well-formed XML: " + XML_ErrorString(XML_GetErrorCode(parser_.get())) +
            " at line " + std::to_string(XML_GetCurrentLineNumber(parser_.get())) + " column " +
            std::to_string(XML_GetCurrentColumnNumber(parser_.get())));
      }
      // Expat keeps an unfinished token (a start tag and its attributes, a comment) whole
      // until it ends; events mark where the last one ended.
      if (fed_ - last_event_ > kMaxXmlMarkupBytes) {
        return Status::DataLoss(what_ + " has markup longer than " +
                                std::to_string(kMaxXmlMarkupBytes) + " bytes");
      }
      data += piece;
      len -= piece;
      if (last) break;
    }
    return Status::Ok();
  }
  bool done() const { return done_; }

 protected:
  virtual void OnStart(std::string_view name, int depth, const XML_Char** attrs) = 0;
  virtual void OnEnd(std::string_view name, int depth) = 0;

  // Sends the current element's text (its direct character data) to text until it ends.
  void Capture(Text* text) { capture_ = text; }
  // Ends the parse with an error, or (Ok) because the answer is known.
  void Stop(Status status) {
    if (!error_.ok() || done_) return;
    if (status.ok()) {
      done_ = true;
    } else {
      error_ = std::move(status);
    }
    XML_StopParser(parser_.get(), XML_FALSE);
  }
  const std::string& what() const { return what_; }

 private:
  bool Stopped() const { return !error_.ok() || done_; }
  void Event() {
    XML_Index at = XML_GetCurrentByteIndex(parser_.get());
    if (at >= 0) last_event_ = std::max<uint64_t>(last_event_, static_cast<uint64_t>(at));
  }

  static void Start(void* data, const XML_Char* name, const XML_Char** attrs) {
    auto* r = static_cast<Reader*>(data);
    if (r->Stopped()) return;
    r->Event();
    r->capture_ = nullptr;
    if (++r->depth_ > kMaxXmlDepth) {
      r->Stop(Status::DataLoss(r->what_ + " nests elements deeper than " +
                               std::to_string(kMaxXmlDepth)));
      return;
    }
    r->OnStart(name, r->depth_, attrs);
  }
  static void End(void* data, const XML_Char* name) {
    auto* r = static_cast<Reader*>(data);
    if (r->Stopped()) return;
    r->Event();
    r->capture_ = nullptr;
    r->OnEnd(name, r->depth_);
    --r->depth_;
  }
  static void Chars(void* data, const XML_Char* s, int len) {
    auto* r = static_cast<Reader*>(data);
    if (r->Stopped()) return;
    r->Event();
    if (r->capture_ != nullptr) r->capture_->Append(std::string_view(s, static_cast<size_t>(len)));
  }
  static void Comment(void* data, const XML_Char*) {
    auto* r = static_cast<Reader*>(data);
    if (!r->Stopped()) r->Event();
  }
  static void Pi(void* data, const XML_Char*, const XML_Char*) {
    auto* r = static_cast<Reader*>(data);
    if (!r->Stopped()) r->Event();
  }
  static void Doctype(void* data, const XML_Char*, const XML_Char*, const XML_Char*, int) {
    auto* r = static_cast<Reader*>(data);
    r->Stop(Status::DataLoss(r->what_ + " has a document type declaration, which is refused"));
  }
  static void Entity(void* data, const XML_Char*, int, const XML_Char*, int, const XML_Char*,
                     const XML_Char*, const XML_Char*, const XML_Char*) {
    auto* r = static_cast<Reader*>(data);
    r->Stop(Status::DataLoss(r->what_ + " declares an entity, which is refused"));
  }

  std::string what_;
  std::unique_ptr<XML_ParserStruct, ParserFree> parser_;
  Status error_;
  bool done_ = false;
  int depth_ = 0;
  Text* capture_ = nullptr;
  uint64_t fed_ = 0;
  uint64_t last_event_ = 0;
};

// repomd.xml: the first <data type="primary"> under <repomd>.
class RepomdReader : public Reader {
 public:
  RepomdReader() : Reader("repomd.xml") {}

  StatusOr<RepomdData> Result() const {
    if (!found_) return Status::FailedPrecondition("repomd.xml has no primary data entry");
    RepomdData data;
    std::optional<std::string_view> sum = checksum_.Get();
    if (!checksum_type_.has_value() || !IsSha256Type(*checksum_type_)) {
      return Status::FailedPrecondition(
          "repomd.xml primary checksum type is \"" +
          EscapeForMessage(checksum_type_.value_or(""), kMaxEchoedBytes) + "\", not sha256");
    }
    std::optional<std::string> hex = sum.has_value() ? Sha256Hex(*sum) : std::nullopt;
    if (!hex.has_value()) {
      return Status::FailedPrecondition("repomd.xml primary sha256 is not 64 hex digits");
    }
    data.sha256 = std::move(*hex);
    if (open_checksum_type_.has_value()) {
      if (!IsSha256Type(*open_checksum_type_)) {
        return Status::FailedPrecondition("repomd.xml primary open-checksum type is \"" +
                                          EscapeForMessage(*open_checksum_type_, kMaxEchoedBytes) +
                                          "\", not sha256");
      }
      std::optional<std::string_view> open = open_checksum_.Get();
      data.open_sha256 = open.has_value() ? Sha256Hex(*open) : std::nullopt;
      if (!data.open_sha256.has_value()) {
        return Status::FailedPrecondition(
            "repomd.xml primary open-checksum sha256 is not 64 hex digits");
      }
    }
    if (href_.empty()) {
      return Status::DataLoss("repomd.xml primary entry has an empty location href");
    }
    data.href = href_;
    for (auto [text, out, name] : {std::tuple(&size_, &data.size, "size"),
                                   std::tuple(&open_size_, &data.open_size, "open-size")}) {
      if (!text->has_value()) continue;
      std::optional<std::string_view> raw = (*text)->Get();
      *out = raw.has_value() ? ParseDecimal(*raw) : std::nullopt;
      if (!out->has_value()) {
        return Status::DataLoss(std::string("repomd.xml primary ") + name + " \"" +
                                EscapeForMessage(raw.value_or("..."), kMaxEchoedBytes) +
                                "\" is not a decimal integer");
      }
    }
    return data;
  }

 protected:
  void OnStart(std::string_view name, int depth, const XML_Char** attrs) override {
    if (depth == 1) {
      root_ok_ = IsElement(name, kRepoNs, "repomd");
      return;
    }
    if (!root_ok_) return;
    if (depth == 2 && !found_ && IsElement(name, kRepoNs, "data") &&
        Attribute(attrs, "type") == "primary") {
      found_ = in_primary_ = true;
      return;
    }
    if (depth != 3 || !in_primary_) return;
    // No real repomd.xml repeats a child of <data>; if one does, the first counts.
    if (IsElement(name, kRepoNs, "checksum") && !checksum_type_.has_value()) {
      checksum_type_ = std::string(Attribute(attrs, "type").value_or(""));
      Capture(&checksum_);
    } else if (IsElement(name, kRepoNs, "open-checksum") && !open_checksum_type_.has_value()) {
      open_checksum_type_ = std::string(Attribute(attrs, "type").value_or(""));
      Capture(&open_checksum_);
    } else if (IsElement(name, kRepoNs, "location") && !have_location_) {
      have_location_ = true;
      href_ = std::string(Attribute(attrs, "href").value_or(""));
    } else if (IsElement(name, kRepoNs, "size") && !size_.has_value()) {
      Capture(&size_.emplace());
    } else if (IsElement(name, kRepoNs, "open-size") && !open_size_.has_value()) {
      Capture(&open_size_.emplace());
    }
  }
  void OnEnd(std::string_view, int depth) override {
    if (depth == 2) in_primary_ = false;
  }

 private:
  bool root_ok_ = false;
  bool found_ = false;
  bool in_primary_ = false;
  std::optional<std::string> checksum_type_, open_checksum_type_;
  Text checksum_, open_checksum_;
  bool have_location_ = false;
  std::string href_;
  std::optional<Text> size_, open_size_;
};

// primary.xml: <package> children of <metadata>, each judged at its end tag.
class PrimaryReader : public Reader {
 public:
  explicit PrimaryReader(const RpmQuery& query) : Reader("primary.xml"), query_(query) {}

  const std::optional<StatusOr<RpmPackageEntry>>& match() const { return match_; }

 protected:
  void OnStart(std::string_view name, int depth, const XML_Char** attrs) override {
    if (depth == 1) {
      root_ok_ = IsElement(name, kCommonNs, "metadata");
      return;
    }
    if (!root_ok_) return;
    if (depth == 2) {
      in_package_ = IsElement(name, kCommonNs, "package");
      if (in_package_) package_.Reset();
      return;
    }
    if (depth != 3 || !in_package_) return;
    Package& p = package_;
    if (IsElement(name, kCommonNs, "name") && !p.have_name) {
      p.have_name = true;
      Capture(&p.name);
    } else if (IsElement(name, kCommonNs, "arch") && !p.have_arch) {
      p.have_arch = true;
      Capture(&p.arch);
    } else if (IsElement(name, kCommonNs, "version") && !p.have_version) {
      p.have_version = true;
      p.ver.assign(Attribute(attrs, "ver").value_or(""));
      p.rel.assign(Attribute(attrs, "rel").value_or(""));
    } else if (IsElement(name, kCommonNs, "checksum") && !p.have_checksum) {
      p.have_checksum = true;
      p.checksum_type.assign(Attribute(attrs, "type").value_or(""));
      Capture(&p.checksum);
    } else if (IsElement(name, kCommonNs, "location") && !p.have_location) {
      p.have_location = true;
      p.href.assign(Attribute(attrs, "href").value_or(""));
    } else if (IsElement(name, kCommonNs, "size") && !p.size.has_value()) {
      // Kept only as text: it is read for the matching package alone.
      p.size = std::string(Attribute(attrs, "package").value_or(""));
    }
  }
  void OnEnd(std::string_view, int depth) override {
    if (depth != 2 || !in_package_) return;
    in_package_ = false;
    const Package& p = package_;
    if (!p.have_name || !p.have_arch || !p.have_version || p.name.Get() != query_.name ||
        p.arch.Get() != query_.arch || p.ver != query_.version || p.rel != query_.release) {
      return;
    }
    match_ = Check(p);
    Stop(Status::Ok());
  }

 private:
  struct Package {
    bool have_name = false, have_arch = false, have_version = false, have_checksum = false,
         have_location = false;
    Text name, arch, checksum;
    std::string ver, rel, checksum_type, href;
    std::optional<std::string> size;

    // Keeps the buffers: primary.xml has tens of thousands of packages.
    void Reset() {
      have_name = have_arch = have_version = have_checksum = have_location = false;
      for (Text* t : {&name, &arch, &checksum}) t->Clear();
      for (std::string* s : {&ver, &rel, &checksum_type, &href}) s->clear();
      size.reset();
    }
  };

  StatusOr<RpmPackageEntry> Check(const Package& p) const {
    std::string who = "primary.xml package " + EscapeForMessage(query_.name, kMaxEchoedBytes) +
                      "-" + EscapeForMessage(query_.version, kMaxEchoedBytes) + "-" +
                      EscapeForMessage(query_.release, kMaxEchoedBytes) + "." +
                      EscapeForMessage(query_.arch, kMaxEchoedBytes);
    if (!p.have_location || p.href != query_.expected_href) {
      return Status::DataLoss(who + " has location \"" + EscapeForMessage(p.href, kMaxEchoedBytes) +
                              "\", want \"" +
                              EscapeForMessage(query_.expected_href, kMaxEchoedBytes) + "\"");
    }
    std::optional<std::string_view> sum = p.checksum.Get();
    std::optional<std::string> hex = sum.has_value() ? Sha256Hex(*sum) : std::nullopt;
    if (!p.have_checksum || !IsSha256Type(p.checksum_type) || !hex.has_value()) {
      return Status::DataLoss(who + " has no valid sha256 checksum");
    }
    RpmPackageEntry entry{p.href, std::move(*hex), std::nullopt};
    if (p.size.has_value()) {
      entry.size = ParseDecimal(*p.size);
      if (!entry.size.has_value()) {
        return Status::DataLoss(who + " has size \"" + EscapeForMessage(*p.size, kMaxEchoedBytes) +
                                "\", not a decimal integer");
      }
    }
    return entry;
  }

  const RpmQuery& query_;
  bool root_ok_ = false;
  bool in_package_ = false;
  Package package_;
  std::optional<StatusOr<RpmPackageEntry>> match_;
};

}  // namespace

StatusOr<RepomdData> ParseRepomdPrimary(std::string_view repomd_xml) {
  RepomdReader reader;
  if (Status s = reader.Feed(repomd_xml.data(), repomd_xml.size(), true); !s.ok()) return s;
  return reader.Result();
}

StatusOr<std::optional<RpmPackageEntry>> FindPrimaryPackage(std::istream& in,
                                                            const RpmQuery& query) {
  if (in.fail() && !in.eof()) return Status::IoError("the primary.xml stream is not readable");
  PrimaryReader reader(query);
  std::unique_ptr<char[]> block(new char[kReadBlockBytes]);
  for (;;) {
    in.read(block.get(), kReadBlockBytes);
    size_t got = static_cast<size_t>(in.gcount());
    if (in.bad()) return Status::IoError("reading primary.xml failed");
    bool final = got < kReadBlockBytes;
    if (Status s = reader.Feed(block.get(), got, final); !s.ok()) return s;
    if (reader.done()) break;
    if (final) return std::optional<RpmPackageEntry>();
  }
  const StatusOr<RpmPackageEntry>& match = *reader.match();
  if (!match.ok()) return match.status();
  return std::optional<RpmPackageEntry>(*match);
}

}  // namespace hotfix::node::repository
