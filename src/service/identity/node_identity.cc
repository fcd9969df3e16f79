#include "service/identity/node_identity.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "common/openssl.h"
#include "service/identity/attested_content.h"
#include "service/identity/identity_cache.h"
#include "service/identity/refusal_cache.h"
#include "service/identity/signed_document.h"

namespace hotfix::service {
namespace {

using Clock = std::chrono::system_clock;
using TimePoint = Clock::time_point;
using ossl::MdPtr;

AuthResult Fail(IdentityFailure failure, Status error) {
  AuthResult result;
  result.failure = failure;
  result.error = std::move(error);
  return result;
}

// What the refusal cache keeps of a refused token's answer.
struct Refusal {
  IdentityFailure failure = IdentityFailure::kMalformed;
  Status error;
};

class AttestedDocumentAuthenticator : public Authenticator {
 public:
  AttestedDocumentAuthenticator(AttestedDocumentOptions options,
                                std::unique_ptr<SignedDocumentVerifier> verifier, MdPtr sha256)
      : options_(std::move(options)),
        verifier_(std::move(verifier)),
        sha256_(std::move(sha256)),
        cache_(options_.cache_entries),
        refusals_(options_.refusal_cache_slots == 0
                      ? nullptr
                      : std::make_unique<RefusalCache<Refusal>>(options_.refusal_cache_slots,
                                                                options_.refusal_cache_ttl)) {
    if (!options_.clock) options_.clock = [] { return Clock::now(); };
  }

  AuthResult Authenticate(std::string_view token) override {
    if (token.empty()) {
      return Fail(IdentityFailure::kMissing,
                  Status::InvalidArgument("no authorization metadata (attested document)"));
    }
    if (token.size() > options_.max_token_bytes) {
      return Fail(
          IdentityFailure::kMalformed,
          Status::InvalidArgument("authorization metadata is " + std::to_string(token.size()) +
                                  " bytes, over " + std::to_string(options_.max_token_bytes)));
    }
    std::optional<ossl::Sha256Digest> digest = ossl::Sha256(sha256_.get(), token);
    if (!digest) return Fail(IdentityFailure::kMalformed, Status::Internal("SHA-256 failed"));
    const TimePoint now = options_.clock();
    if (std::optional<AuthResult> cached = FromCache(*digest, now)) return *cached;
    if (std::optional<Refusal> refused = refusals_ ? refusals_->Find(*digest, now) : std::nullopt) {
      refusal_cache_hits_.fetch_add(1, std::memory_order_relaxed);
      return Fail(refused->failure, std::move(refused->error));
    }
    TimePoint cache_until;
    AuthResult result = Verify(token, now, &cache_until);
    if (!result.ok() && refusals_) refusals_->Insert(*digest, {result.failure, result.error}, now);
    // Until the document expires, or its signer certificate does if that comes first.
    if (result.ok()) {
      result.remember =
          IdentityCacheTicket{this, *digest, std::min(result.identity.expires_at, cache_until)};
    }
    return result;
  }

  void Admit(const NodeIdentity& identity, const IdentityCacheTicket& ticket) override {
    if (ticket.issuer != this) return;
    cache_.Insert(ticket.token_sha256, identity, ticket.until, options_.clock());
  }

  AuthenticatorStats stats() const override {
    AuthenticatorStats s;
    s.verifications = verifications_.load(std::memory_order_relaxed);
    s.cache_hits = cache_hits_.load(std::memory_order_relaxed);
    s.cache_evictions = cache_.evictions();
    s.cache_entries = cache_.size();
    s.signer_cache_hits = verifier_->signer_cache_hits();
    s.signer_cache_entries = verifier_->signer_cache_entries();
    s.signer_refusal_cache_hits = verifier_->signer_refusal_cache_hits();
    s.refusal_cache_hits = refusal_cache_hits_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  // A fresh entry is the identity; an entry past its document's expiry is kExpired without another
  // verification. Anything else (no entry; the signer certificate ran out first): the full check.
  std::optional<AuthResult> FromCache(const ossl::Sha256Digest& digest, TimePoint now) {
    bool fresh = false;
    std::shared_ptr<const NodeIdentity> identity = cache_.Find(digest, now, &fresh);
    if (!identity || (!fresh && now <= identity->expires_at)) return std::nullopt;
    cache_hits_.fetch_add(1, std::memory_order_relaxed);
    if (!fresh) {
      return Fail(IdentityFailure::kExpired,
                  Status::PermissionDenied("attested document expired at " +
                                           FormatUtc(identity->expires_at)));
    }
    AuthResult result;
    result.identity = *identity;
    return result;
  }

  AuthResult Verify(std::string_view token, TimePoint now, TimePoint* cache_until) {
    verifications_.fetch_add(1, std::memory_order_relaxed);
    StatusOr<std::string> der = DecodeToken(token);
    if (!der.ok()) {
      ERR_clear_error();
      return Fail(IdentityFailure::kMalformed, der.status());
    }
    SignedDocument signed_doc = verifier_->Verify(*der, now);
    if (!signed_doc.ok()) return Fail(signed_doc.failure, signed_doc.error);
    StatusOr<AttestedContent> content = ParseAttestedContent(signed_doc.content);
    if (!content.ok()) return Fail(IdentityFailure::kBadContent, content.status());
    if (Status s = CheckAttestedTimes(*content, now, options_.max_token_age); !s.ok()) {
      return Fail(IdentityFailure::kExpired, s);
    }
    // Cached no longer than the document is acceptable: its signer's, and its age limit.
    *cache_until = signed_doc.signer_not_after;
    if (options_.max_token_age.count() > 0) {
      *cache_until = std::min(*cache_until, content->created_on + options_.max_token_age);
    }
    AuthResult result;
    result.identity = std::move(content->identity);
    return result;
  }

  AttestedDocumentOptions options_;
  std::unique_ptr<SignedDocumentVerifier> verifier_;
  MdPtr sha256_;  // fetched once: an implicit fetch per digest costs a provider lookup
  IdentityCache cache_;
  std::unique_ptr<RefusalCache<Refusal>> refusals_;  // null when refusal_cache_slots is 0
  std::atomic<uint64_t> verifications_{0};
  std::atomic<uint64_t> cache_hits_{0};
  std::atomic<uint64_t> refusal_cache_hits_{0};
};

class InsecureAnyTokenAuthenticator : public Authenticator {
 public:
  AuthResult Authenticate(std::string_view token) override {
    if (token.empty()) {
      return Fail(IdentityFailure::kMissing, Status::InvalidArgument("no authorization metadata"));
    }
    AuthResult result;
    result.identity.vm_id = "insecure";
    result.identity.subscription_id = "insecure";
    result.identity.expires_at = TimePoint::max();
    result.identity.insecure = true;
    return result;
  }
};

}  // namespace

void AddCounters(const AuthenticatorStats& from, AuthenticatorStats* to) {
  to->verifications += from.verifications;
  to->cache_hits += from.cache_hits;
  to->cache_evictions += from.cache_evictions;
  to->signer_cache_hits += from.signer_cache_hits;
  to->signer_refusal_cache_hits += from.signer_refusal_cache_hits;
  to->refusal_cache_hits += from.refusal_cache_hits;
}

const char* IdentityFailureName(IdentityFailure failure) {
  switch (failure) {
    case IdentityFailure::kMissing:
      return "missing";
    case IdentityFailure::kMalformed:
      return "malformed";
    case IdentityFailure::kUntrustedSigner:
      return "untrusted_signer";
    case IdentityFailure::kWrongSigner:
      return "wrong_signer";
    case IdentityFailure::kBadContent:
      return "bad_content";
    case IdentityFailure::kExpired:
      return "expired";
  }
  return "unknown";
}

StatusOr<std::unique_ptr<Authenticator>> NewAttestedDocumentAuthenticator(
    AttestedDocumentOptions options) {
  if (options.signer_name.empty()) {
    return Status::InvalidArgument("attested document signer name is empty");
  }
  auto verifier = SignedDocumentVerifier::Create(options);
  if (!verifier.ok()) return verifier.status();
  MdPtr sha256(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  if (!sha256) return Status::Internal("fetching SHA-256: " + ossl::DrainErrors());
  return std::unique_ptr<Authenticator>(new AttestedDocumentAuthenticator(
      std::move(options), std::move(verifier).value(), std::move(sha256)));
}

std::unique_ptr<Authenticator> NewInsecureAnyTokenAuthenticator() {
  return std::make_unique<InsecureAnyTokenAuthenticator>();
}

}  // namespace hotfix::service
