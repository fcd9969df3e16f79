// The service's attested-document verifier (service/identity/node_identity.h, signed_document.h,
// attested_content.h): the `authorization` metadata any TLS client can send. Three ways in,
// chosen by the first byte:
//  - even: the rest is the token as sent: size cap, strict base64, DER PKCS#7, PKCS7_verify
//    against the roots, the signer's name, through the cache;
//  - 1 mod 4: the rest is the document's JSON content, signed here by a signer the roots
//    trust, so that the content parser, the timestamps and the expiry checks are reached (a
//    fuzzer cannot forge a signature);
//  - 3 mod 4: a genuine document of that signer (fixed content, valid at the fuzz clock), or
//    with bit 2 set one of a signer of another CA (whose chain failed: a refused signer
//    kept), with the rest as edits to its DER: each 3 bytes (offset high, offset low, XOR
//    mask) flip bits at offset modulo the size; 1 or 2 bytes left over are appended. This
//    reaches the layout walk and the envelope checks with a kept certificate embedded, trusted
//    or refused.
//
// Properties: an accepted identity has a vmId and a subscriptionId and is not expired at the
// authenticator's clock; asking twice (the second answer from the cache) gives the same
// answer; a refusal's message never echoes the token; and a fresh authenticator (the full
// check, nothing cached) and the long-lived one whose caches hold the signer and the refused
// signer give the same answer, the same failure and the same identity. The content parser
// (nlohmann's SAX events) reads every input, the raw bytes and the JSON to be signed, as the
// DOM reading it replaced did (dom_reference below).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/base64.h"
#include "fuzz_util.h"
#include "imds_standin.h"
#include "service/identity/attested_content.h"
#include "service/identity/node_identity.h"
#include "service/identity/signed_document.h"
#include "test_certs.h"

using namespace hotfix;
using namespace hotfix::service;
using Clock = std::chrono::system_clock;

namespace {

// The fixed "now" of the documents' timestamps, so that seeds stay valid: seeds are created
// 12/02/26 09:00:00 and expire 12/02/26 15:00:00 (IMDS's six hours).
Clock::time_point FuzzNow() {
  return Clock::from_time_t(1796216400);  // 2026-12-02T12:00:00Z
}

AttestedDocumentOptions Options(const testsupport::TestCa& ca) {
  AttestedDocumentOptions options;
  options.trust_roots_pem = ca.cert_pem();
  options.clock = FuzzNow;
  options.cache_entries = 256;  // small: eviction is exercised too, memory stays flat
  // The seeds are created 3 hours before FuzzNow: valid documents, too old for the default
  // --max-token-age, which the unit tests cover.
  options.max_token_age = std::chrono::seconds(0);
  return options;
}

struct World {
  testsupport::TestCa ca = testsupport::TestCa::Create("fuzz-imds-root");
  testsupport::CertAndKey signer = testsupport::IssueImdsSigner(ca);
  // Same names, another key: its documents' chains fail.
  testsupport::TestCa foreign_ca = testsupport::TestCa::Create("fuzz-imds-root");
  testsupport::CertAndKey foreign_signer = testsupport::IssueImdsSigner(foreign_ca);
  std::unique_ptr<Authenticator> auth;  // long-lived: its caches hold both signers
  std::string genuine_der;              // a document of `signer`, valid at FuzzNow
  std::string foreign_der;              // the same content signed by `foreign_signer`

  World() {
    auth = NewAttestedDocumentAuthenticator(Options(ca)).value();
    const std::string json = R"({"vmId":"fuzz-vm","subscriptionId":"fuzz-sub","sku":"fuzz",)"
                             R"("timeStamp":{"createdOn":"12/02/26 09:00:00 -0000",)"
                             R"("expiresOn":"12/02/26 15:00:00 -0000"}})";
    std::string token = testsupport::SignAttestedContent(json, signer);
    genuine_der = DecodeStdBase64(token).value();
    // Warm: the signer certificate is cached from here on (nothing the fuzzer sends can
    // evict it: only certificates that chain to `ca` are cached).
    FUZZ_CHECK(auth->Authenticate(token).ok());
    FUZZ_CHECK(auth->stats().signer_cache_entries == 1);
    // The foreign signer is kept as refused (until a refusal of the fuzzer's takes its slot).
    std::string foreign = testsupport::SignAttestedContent(json, foreign_signer);
    foreign_der = DecodeStdBase64(foreign).value();
    FUZZ_CHECK(auth->Authenticate(foreign).failure == IdentityFailure::kUntrustedSigner);
    FUZZ_CHECK(
        auth->Authenticate(testsupport::SignAttestedContent(json + " ", foreign_signer)).failure ==
        IdentityFailure::kUntrustedSigner);
    FUZZ_CHECK(auth->stats().signer_refusal_cache_hits == 1);
  }
};

World& TheWorld() {
  static World* world = new World();  // never destroyed: libFuzzer exits without unwinding
  return *world;
}

void CheckAnswer(Authenticator& auth, const std::string& token) {
  AuthResult first = auth.Authenticate(token);
  if (first.ok() && first.remember) auth.Admit(first.identity, *first.remember);  // as served
  AuthResult again = auth.Authenticate(token);
  FUZZ_CHECK(first.ok() == again.ok());
  if (first.ok()) {
    FUZZ_CHECK(!first.identity.vm_id.empty());
    FUZZ_CHECK(!first.identity.subscription_id.empty());
    FUZZ_CHECK(first.identity.expires_at >= FuzzNow());
    FUZZ_CHECK(again.identity.vm_id == first.identity.vm_id);
    FUZZ_CHECK(again.identity.subscription_id == first.identity.subscription_id);
  } else {
    FUZZ_CHECK(first.failure == again.failure);
    // Only tokens no fixed message text could contain: long, with a character the messages'
    // prose does not use (base64's '+', '/', '=' among them).
    const bool distinctive =
        token.size() >= 32 && token.find_first_not_of(
                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                                  "qrstuvwxyz0123456789 ().,:_-\"") != std::string::npos;
    if (distinctive) FUZZ_CHECK(first.error.message().find(token) == std::string::npos);
  }
}

// The full check's answer (a fresh authenticator: nothing cached) against the warm one's.
void CheckSameAsFullCheck(const std::string& token) {
  World& world = TheWorld();
  std::unique_ptr<Authenticator> cold = NewAttestedDocumentAuthenticator(Options(world.ca)).value();
  AuthResult full = cold->Authenticate(token);
  FUZZ_CHECK(cold->stats().signer_cache_hits == 0);
  FUZZ_CHECK(cold->stats().signer_refusal_cache_hits == 0);
  AuthResult warm = world.auth->Authenticate(token);
  FUZZ_CHECK(full.ok() == warm.ok());
  if (full.ok()) {
    FUZZ_CHECK(warm.identity.vm_id == full.identity.vm_id);
    FUZZ_CHECK(warm.identity.subscription_id == full.identity.subscription_id);
    FUZZ_CHECK(warm.identity.sku == full.identity.sku);
    FUZZ_CHECK(warm.identity.expires_at == full.identity.expires_at);
  } else {
    FUZZ_CHECK(warm.failure == full.failure);
  }
}

// A document with the fuzzer's edits (see the header).
std::string Edited(std::string der, std::string_view edits) {
  size_t i = 0;
  for (; i + 3 <= edits.size(); i += 3) {
    size_t offset =
        (static_cast<unsigned char>(edits[i]) << 8) | static_cast<unsigned char>(edits[i + 1]);
    der[offset % der.size()] = static_cast<char>(der[offset % der.size()] ^ edits[i + 2]);
  }
  der.append(edits.substr(i));
  return EncodeStdBase64(der);
}

// The DOM reading ParseAttestedContent replaced (attested_content.cc, before its SAX
// handler): the reference the handler is held to, message for message and field for field.
namespace dom_reference {

const std::string* NonEmptyString(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return nullptr;
  }
  return &it->get_ref<const std::string&>();
}

std::optional<Clock::time_point> Timestamp(const nlohmann::json& doc, const char* key) {
  auto stamps = doc.find("timeStamp");
  if (stamps == doc.end() || !stamps->is_object()) return std::nullopt;
  const std::string* text = NonEmptyString(*stamps, key);
  return text == nullptr ? std::nullopt : ParseImdsTimestamp(*text);
}

StatusOr<AttestedContent> Parse(std::string_view json) {
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
  std::optional<Clock::time_point> created = Timestamp(doc, "createdOn");
  std::optional<Clock::time_point> expires = Timestamp(doc, "expiresOn");
  if (!created || !expires || *expires <= *created) {
    return Status::InvalidArgument(
        "timeStamp.createdOn/expiresOn missing, not MM/DD/YY HH:MM:SS -0000, or out of order");
  }
  out.created_on = *created;
  out.identity.expires_at = *expires;
  return out;
}

}  // namespace dom_reference

void CheckContentReadAsTheDomReadsIt(std::string_view json) {
  StatusOr<AttestedContent> read = ParseAttestedContent(json);
  StatusOr<AttestedContent> reference = dom_reference::Parse(json);
  if (!reference.ok()) reference = reference.status().Annotate("attested document content");
  bool same = read.ok() == reference.ok();
  if (same && read.ok()) {
    same = read->identity.vm_id == reference->identity.vm_id &&
           read->identity.subscription_id == reference->identity.subscription_id &&
           read->identity.sku == reference->identity.sku &&
           read->identity.expires_at == reference->identity.expires_at &&
           read->created_on == reference->created_on;
  } else if (same) {
    same = read.status().ToString() == reference.status().ToString();
  }
  if (!same) {
    std::fprintf(stderr, "ParseAttestedContent: \"%s\", the DOM reading: \"%s\"\n",
                 read.ok() ? "ok" : read.status().ToString().c_str(),
                 reference.ok() ? "ok" : reference.status().ToString().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& world = TheWorld();
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::string token;
  if ((data[0] & 1) == 0) {
    token = std::string(rest);
    CheckContentReadAsTheDomReadsIt(rest);
    VerifySignedDocument(rest, world.ca.cert_pem(), "metadata.azure.com");
    ParseImdsTimestamp(rest);
  } else if ((data[0] & 2) == 0) {
    CheckContentReadAsTheDomReadsIt(rest);
    token = testsupport::SignAttestedContent(rest, world.signer);
  } else {
    token = Edited((data[0] & 4) == 0 ? world.genuine_der : world.foreign_der, rest);
  }
  CheckSameAsFullCheck(token);
  CheckAnswer(*world.auth, token);
  return 0;
}
