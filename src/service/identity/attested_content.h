// An attested document's content, read only after its signature verified (signed_document.h):
// IMDS's JSON (vmId, subscriptionId, sku, timeStamp.createdOn/expiresOn) and its time checks.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "service/identity/node_identity.h"

namespace hotfix::service {

struct AttestedContent {
  NodeIdentity identity;  // vm_id, subscription_id, sku, expires_at
  std::chrono::system_clock::time_point created_on;
};

// InvalidArgument naming what is missing or malformed; never throws on any input.
StatusOr<AttestedContent> ParseAttestedContent(std::string_view json);

// PermissionDenied when the document has expired at `now`, was created further in the future than a
// node's clock may run ahead (5 minutes), or was created longer than max_age ago (0: no limit): a
// document lives 6 hours, but a node fetches it just before its call, so an old one is a replay.
Status CheckAttestedTimes(const AttestedContent& content, std::chrono::system_clock::time_point now,
                          std::chrono::seconds max_age);

// IMDS's timestamp, "MM/DD/YY HH:MM:SS -0000" (20YY; the offset may be any +-HHMM), exactly
// that shape and a real calendar date; nullopt otherwise.
std::optional<std::chrono::system_clock::time_point> ParseImdsTimestamp(std::string_view text);

// "2026-12-03T14:00:00Z", for messages.
std::string FormatUtc(std::chrono::system_clock::time_point t);

}  // namespace hotfix::service
