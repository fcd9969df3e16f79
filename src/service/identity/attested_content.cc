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

// A non-empty string member, or nullptr.
const std::string* NonEmptyString(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return nullptr;
  }
  return &it->get_ref<const std::string&>();
}

std::optional<TimePoint> Timestamp(const nlohmann::json& doc, const char* key) {
  auto stamps = doc.find("timeStamp");
  if (stamps == doc.end() || !stamps->is_object()) return std::nullopt;
  const std::string* text = NonEmptyString(*stamps, key);
  return text == nullptr ? std::nullopt : ParseImdsTimestamp(*text);
}

StatusOr<AttestedContent> ParseJsonContent(std::string_view json) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument("not a JSON object");
  AttestedContent out;
  const std::string* vm_id = NonEmptyString(doc, "vmId");
  const std::string* subscription = NonEmptyString(doc, "subscriptionId");
  if (vm_id == nullptr) return Status::InvalidArgument("no vmId string");
  if (subscription == nullptr) return Status::InvalidArgument("no subscriptionId string");
  out.identity.vm_id = *vm_id;
  out.identity.subscription_id = *subscription;
  if (const std::string* sku = NonEmptyString(doc, "sku")) out.identity.sku = *sku;
  std::optional<TimePoint> created = Timestamp(doc, "createdOn");
  std::optional<TimePoint> expires = Timestamp(doc, "expiresOn");
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
