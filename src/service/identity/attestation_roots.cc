#include "service/identity/attestation_roots.h"

#include <openssl/x509.h>

#include <ctime>

#include "common/openssl.h"

namespace hotfix::service {

StatusOr<std::unique_ptr<AttestationRoots>> AttestationRoots::Load(
    std::string path, AttestedDocumentOptions options) {
  std::unique_ptr<AttestationRoots> roots(
      new AttestationRoots(std::move(path), std::move(options)));
  if (Status st = roots->Build(); !st.ok()) return st;
  return roots;
}

AttestationRoots::AttestationRoots(std::string path, AttestedDocumentOptions options)
    : path_(std::move(path)), options_(std::move(options)) {}

Status AttestationRoots::Build() {
  const std::string flag =
      options_.anchors_are_issuers ? "--attestation-issuers" : "--attestation-roots";
  stamp_ = StampOf(path_);  // tried, loaded or not: a bad file is logged once, not per check
  StatusOr<std::string> pem = ReadFlagFile(flag.c_str(), path_);
  if (!pem.ok()) return pem.status();
  StatusOr<std::vector<ossl::X509Ptr>> parsed = ossl::ParsePemCertificates(*pem);
  if (!parsed.ok()) return parsed.status().Annotate(flag + " " + path_);
  int64_t earliest = 0;
  for (const ossl::X509Ptr& cert : *parsed) {
    struct tm expiry {};
    if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &expiry) != 1) continue;
    const int64_t at = static_cast<int64_t>(timegm(&expiry));
    if (earliest == 0 || at < earliest) earliest = at;
  }
  AttestedDocumentOptions options = options_;
  options.trust_roots_pem = std::move(*pem);
  auto auth = NewAttestedDocumentAuthenticator(std::move(options));
  if (!auth.ok()) return auth.status().Annotate(flag + " " + path_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_) AddCounters(current_->stats(), &retired_);
    current_ = std::move(*auth);
  }
  not_after_.store(earliest, std::memory_order_relaxed);
  certificates_.store(parsed->size(), std::memory_order_relaxed);
  return Status::Ok();
}

std::shared_ptr<Authenticator> AttestationRoots::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

AuthResult AttestationRoots::Authenticate(std::string_view token) {
  // A shared reference: a reload meanwhile frees the old authenticator after this call.
  return current()->Authenticate(token);
}

void AttestationRoots::Admit(const NodeIdentity& identity, const IdentityCacheTicket& ticket) {
  current()->Admit(identity, ticket);
}

AuthenticatorStats AttestationRoots::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  AuthenticatorStats s = current_->stats();
  AddCounters(retired_, &s);
  return s;
}

void AttestationRoots::ReloadIfChanged(Logger* log) {
  if (StampOf(path_) == stamp_) return;
  if (Status status = Build(); !status.ok()) {
    reload_ok_.store(false, std::memory_order_relaxed);
    log->Error("attestation roots changed but do not load; still verifying with the previous roots",
               {{"error", status}});
    return;
  }
  reload_ok_.store(true, std::memory_order_relaxed);
  log->Info("attestation roots reloaded",
            {{"attestation_roots", path_},
             {"root_certificates", static_cast<int64_t>(certificates())},
             {"earliest_expiry", static_cast<int64_t>(not_after())}});
}

}  // namespace hotfix::service
