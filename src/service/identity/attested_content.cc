#include "service/identity/attested_content.h"

#include <ctime>
#include <exception>
#include <nlohmann/json.hpp>

namespace hotfix::service {
namespace {

using Clock = std::chrono::system_clock;
using TimePoint = Clock::time_point;

// A node's clock may run ahead of ours; a document from further ahead than this was not
// issued by an IMDS we agree with about the time.
constexpr auto kMaxFutureSkew = std::chrono::minutes(5);

// Two ASCII digits at text[at], or -1.
int TwoDigits(std::string_view text, size_t at) {
  char a = text[at], b = text[at + 1];
  if (a < '0' || a > '9' || b < '0' || b > '9') return -1;
  return (a - '0') * 10 + (b - '0');
}

// The members the service reads, taken from nlohmann's SAX events rather than a DOM: the
// document is parsed, and checked whole, by the same lexer and parser, but nothing is kept
// beyond these five strings (the DOM was an allocation per member, about 2 % of a node boot's
// CPU). A repeated member counts as the DOM counts it: the last one wins, whatever its type.
// tests/fuzz/attested_document_fuzz.cc holds this to the DOM reading it replaced.
class ContentMembers : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool top_level_object() const { return top_level_object_; }
  const std::optional<std::string>& vm_id() const { return vm_id_; }
  const std::optional<std::string>& subscription_id() const { return subscription_id_; }
  const std::optional<std::string>& sku() const { return sku_; }
  const std::optional<std::string>& created_on() const { return created_on_; }
  const std::optional<std::string>& expires_on() const { return expires_on_; }

  bool null() override { return Other(); }
  bool boolean(bool) override { return Other(); }
  bool number_integer(number_integer_t) override { return Other(); }
  bool number_unsigned(number_unsigned_t) override { return Other(); }
  bool number_float(number_float_t, const string_t&) override { return Other(); }
  bool binary(binary_t&) override { return Other(); }
  bool string(string_t& value) override {
    First(false);
    if (std::optional<std::string>* slot = StringSlot()) {
      *slot = value;
    } else if (next_ == Member::kTimeStamp) {
      ClearTimeStamp();
    }
    next_ = Member::kNone;
    return true;
  }
  bool start_object(std::size_t) override {
    First(true);
    if (next_ == Member::kTimeStamp) {
      ClearTimeStamp();
      in_time_stamp_ = true;
    } else if (std::optional<std::string>* slot = StringSlot()) {
      slot->reset();
    }
    next_ = Member::kNone;
    ++depth_;
    return true;
  }
  bool key(string_t& name) override {
    next_ = Member::kNone;
    if (depth_ == 1) {
      if (name == "vmId") next_ = Member::kVmId;
      if (name == "subscriptionId") next_ = Member::kSubscriptionId;
      if (name == "sku") next_ = Member::kSku;
      if (name == "timeStamp") next_ = Member::kTimeStamp;
    } else if (depth_ == 2 && in_time_stamp_) {
      if (name == "createdOn") next_ = Member::kCreatedOn;
      if (name == "expiresOn") next_ = Member::kExpiresOn;
    }
    return true;
  }
  bool end_object() override {
    if (--depth_ == 1) in_time_stamp_ = false;
    return true;
  }
  bool start_array(std::size_t) override {
    Other();
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  enum class Member { kNone, kVmId, kSubscriptionId, kSku, kTimeStamp, kCreatedOn, kExpiresOn };

  void First(bool object) {
    if (seen_any_) return;
    seen_any_ = true;
    top_level_object_ = object;
  }
  // The string member the next value is for, or nullptr.
  std::optional<std::string>* StringSlot() {
    switch (next_) {
      case Member::kVmId:
        return &vm_id_;
      case Member::kSubscriptionId:
        return &subscription_id_;
      case Member::kSku:
        return &sku_;
      case Member::kCreatedOn:
        return &created_on_;
      case Member::kExpiresOn:
        return &expires_on_;
      case Member::kNone:
      case Member::kTimeStamp:
        break;
    }
    return nullptr;
  }
  // timeStamp (again), and whatever it held before is gone.
  void ClearTimeStamp() {
    created_on_.reset();
    expires_on_.reset();
  }
  // A value that is no string (an array, a number, ...): it replaces what the member held.
  bool Other() {
    First(false);
    if (std::optional<std::string>* slot = StringSlot()) {
      slot->reset();
    } else if (next_ == Member::kTimeStamp) {
      ClearTimeStamp();
    }
    next_ = Member::kNone;
    return true;
  }

  bool seen_any_ = false;
  bool top_level_object_ = false;
  int depth_ = 0;               // objects and arrays open around the next event
  bool in_time_stamp_ = false;  // inside the top-level timeStamp object
  Member next_ = Member::kNone;
  std::optional<std::string> vm_id_, subscription_id_, sku_, created_on_, expires_on_;
};

// A member's string when it is a non-empty one, else nullptr.
const std::string* NonEmpty(const std::optional<std::string>& member) {
  return member && !member->empty() ? &*member : nullptr;
}

std::optional<TimePoint> Timestamp(const std::optional<std::string>& member) {
  const std::string* text = NonEmpty(member);
  return text == nullptr ? std::nullopt : ParseImdsTimestamp(*text);
}

StatusOr<AttestedContent> ParseJsonContent(std::string_view json) {
  ContentMembers doc;
  if (!nlohmann::json::sax_parse(json, &doc) || !doc.top_level_object()) {
    return Status::InvalidArgument("not a JSON object");
  }
  AttestedContent out;
  const std::string* vm_id = NonEmpty(doc.vm_id());
  const std::string* subscription = NonEmpty(doc.subscription_id());
  if (vm_id == nullptr) return Status::InvalidArgument("no vmId string");
  if (subscription == nullptr) return Status::InvalidArgument("no subscriptionId string");
  out.identity.vm_id = *vm_id;
  out.identity.subscription_id = *subscription;
  if (const std::string* sku = NonEmpty(doc.sku())) out.identity.sku = *sku;
  std::optional<TimePoint> created = Timestamp(doc.created_on());
  std::optional<TimePoint> expires = Timestamp(doc.expires_on());
  if (!created || !expires || *expires <= *created) {
    return Status::InvalidArgument(
        "timeStamp.createdOn/expiresOn missing, not MM/DD/YY HH:MM:SS -0000, or out of order");
  }
  out.created_on = *created;
  out.identity.expires_at = *expires;
  return out;
}

}  // namespace

// The document's JSON as IMDS writes it. Parsed only after the signature verified, so the
// parser sees nothing but Azure's own bytes; still, nothing here may throw into the caller.
StatusOr<AttestedContent> ParseAttestedContent(std::string_view json) {
  StatusOr<AttestedContent> content = Status::Internal("unreached");
  try {
    content = ParseJsonContent(json);
  } catch (const std::exception& e) {  // allocation failure; the JSON paths do not throw
    return Status::Internal(e.what()).Annotate("attested document content");
  }
  if (!content.ok()) return content.status().Annotate("attested document content");
  return content;
}

std::string FormatUtc(TimePoint t) {
  std::time_t tt = Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Status CheckAttestedTimes(const AttestedContent& content, TimePoint now,
                          std::chrono::seconds max_age) {
  if (now > content.identity.expires_at) {
    return Status::PermissionDenied("attested document expired at " +
                                    FormatUtc(content.identity.expires_at));
  }
  if (content.created_on > now + kMaxFutureSkew) {
    return Status::PermissionDenied("attested document created in the future, at " +
                                    FormatUtc(content.created_on));
  }
  if (max_age.count() > 0 && now - content.created_on > max_age) {
    return Status::PermissionDenied("attested document created at " +
                                    FormatUtc(content.created_on) + ", longer ago than " +
                                    std::to_string(max_age.count()) + " s (--max-token-age)");
  }
  return Status::Ok();
}

// By hand rather than strptime+timegm: strptime skips whitespace and takes one-digit fields
// ("1/2/24 3:4:5"), is locale-dependent, and glibc's %z result is ignored by timegm (itself
// a non-POSIX extension). std::chrono's calendar rejects 02/30 and needs no time zone.
std::optional<TimePoint> ParseImdsTimestamp(std::string_view text) {
  constexpr std::string_view kShape = "00/00/00 00:00:00 +0000";
  if (text.size() != kShape.size()) return std::nullopt;
  for (size_t i : {2, 5}) {
    if (text[i] != '/') return std::nullopt;
  }
  if (text[8] != ' ' || text[11] != ':' || text[14] != ':' || text[17] != ' ') return std::nullopt;
  if (text[18] != '+' && text[18] != '-') return std::nullopt;
  int mon = TwoDigits(text, 0), mday = TwoDigits(text, 3), yy = TwoDigits(text, 6);
  int hh = TwoDigits(text, 9), mm = TwoDigits(text, 12), ss = TwoDigits(text, 15);
  int off_h = TwoDigits(text, 19), off_m = TwoDigits(text, 21);
  if (mon < 0 || mday < 0 || yy < 0 || off_h < 0 || off_m < 0) return std::nullopt;
  if (hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 59) return std::nullopt;
  if (off_h > 23 || off_m > 59) return std::nullopt;
  using namespace std::chrono;
  year_month_day day{year(2000 + yy), month(static_cast<unsigned>(mon)),
                     std::chrono::day(static_cast<unsigned>(mday))};
  if (!day.ok()) return std::nullopt;
  // Local = UTC + offset, so UTC = local - offset.
  minutes offset = hours(off_h) + minutes(off_m);
  if (text[18] == '-') offset = -offset;
  return sys_days(day) + hours(hh) + minutes(mm) + seconds(ss) - offset;
}

}  // namespace hotfix::service
