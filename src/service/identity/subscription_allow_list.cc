#include "service/identity/subscription_allow_list.h"

#include "common/text.h"

namespace hotfix::service {
namespace {

// 8-4-4-4-12 hexadecimal digits, as Azure writes a subscription ID.
bool IsGuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const char c = s[i];
    const bool hex = IsAsciiDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (dash ? c != '-' : !hex) return false;
  }
  return true;
}

bool IsSeparator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

std::unique_ptr<SubscriptionAllowList> SubscriptionAllowList::Fixed(
    const std::vector<std::string>& ids) {
  std::unique_ptr<SubscriptionAllowList> list(new SubscriptionAllowList(""));
  std::set<std::string> lower;
  for (const std::string& id : ids) lower.insert(AsciiLower(id));
  list->Install(std::move(lower));
  return list;
}

StatusOr<std::unique_ptr<SubscriptionAllowList>> SubscriptionAllowList::Load(std::string path) {
  std::unique_ptr<SubscriptionAllowList> list(new SubscriptionAllowList(std::move(path)));
  if (Status st = list->Build(); !st.ok()) return st;
  return list;
}

StatusOr<std::set<std::string>> SubscriptionAllowList::Parse(std::string_view text) {
  if (text.size() > kMaxAllowListBytes) {
    return Status::InvalidArgument("more than " + std::to_string(kMaxAllowListBytes) + " bytes");
  }
  std::set<std::string> ids;
  size_t line = 1;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (IsSeparator(c)) {
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      size_t end = i;
      while (end < text.size() && !IsSeparator(text[end]) && text[end] != '#') ++end;
      const std::string_view word = text.substr(i, end - i);
      if (!IsGuid(word)) {
        return Status::InvalidArgument("line " + std::to_string(line) + ": " + "\"" +
                                       EscapeForMessage(word, 64) + "\"" +
                                       " is not a subscription ID (a GUID)");
      }
      ids.insert(AsciiLower(word));
      if (ids.size() > kMaxAllowListEntries) {
        return Status::InvalidArgument("more than " + std::to_string(kMaxAllowListEntries) +
                                       " subscriptions");
      }
      i = end;
    }
  }
  if (ids.empty()) {
    return Status::InvalidArgument(
        "no subscription ID: an empty list would let every subscription call, so it is "
        "refused (to allow any, give neither --allowed-subscriptions nor the file)");
  }
  return ids;
}

Status SubscriptionAllowList::Build() {
  stamp_ = StampOf(path_);  // tried, loaded or not: a bad file is logged once, not per check
  StatusOr<std::string> text = ReadFlagFile("--allowed-subscriptions-file", path_);
  if (!text.ok()) return text.status();
  StatusOr<std::set<std::string>> ids = Parse(*text);
  if (!ids.ok()) return ids.status().Annotate("--allowed-subscriptions-file " + path_);
  Install(std::move(*ids));
  return Status::Ok();
}

void SubscriptionAllowList::Install(std::set<std::string> ids) {
  size_.store(ids.size(), std::memory_order_relaxed);
  auto next = std::make_shared<const std::set<std::string>>(std::move(ids));
  std::lock_guard<std::mutex> lock(mu_);
  ids_ = std::move(next);
}

bool SubscriptionAllowList::Allows(std::string_view subscription) const {
  // Nothing listed is only ever the flag's empty list (a file's list is never empty): every
  // call then skips the lock and the lower-casing, as it did before lists could change.
  if (size() == 0) return true;
  std::shared_ptr<const std::set<std::string>> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids = ids_;
  }
  return ids->count(AsciiLower(subscription)) != 0;
}

void SubscriptionAllowList::ReloadIfChanged(Logger* log) {
  if (path_.empty() || StampOf(path_) == stamp_) return;
  if (Status status = Build(); !status.ok()) {
    reload_ok_.store(false, std::memory_order_relaxed);
    log->Error("allowed subscriptions changed but do not load; still allowing the previous list",
               {{"error", status}});
    return;
  }
  reload_ok_.store(true, std::memory_order_relaxed);
  log->Info("allowed subscriptions reloaded", {{"allowed_subscriptions_file", path_},
                                               {"subscriptions", static_cast<int64_t>(size())}});
}

}  // namespace hotfix::service
