// The service's attested-document verifier (service/node_identity.h): the `authorization`
// metadata any TLS client can send. Two ways in, chosen by the first byte:
//  - even: the rest is the token as sent: size cap, strict base64, DER PKCS#7, PKCS7_verify
//    against the roots, the signer's name, through the cache;
//  - odd: the rest is the document's JSON content, signed here by a signer the roots trust, so
//    that the content parser, the timestamps and the expiry checks are reached (a fuzzer
//    cannot forge a signature).
//
// Properties: an accepted identity has a vmId and a subscriptionId and is not expired at the
// authenticator's clock; asking twice (the second answer from the cache) gives the same
// answer; a refusal's message never echoes the token.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "imds_standin.h"
#include "service/node_identity.h"
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

struct World {
  testsupport::TestCa ca = testsupport::TestCa::Create("fuzz-imds-root");
  testsupport::CertAndKey signer = testsupport::IssueImdsSigner(ca);
  std::unique_ptr<Authenticator> auth;

  World() {
    AttestedDocumentOptions options;
    options.trust_roots_pem = ca.cert_pem();
    options.clock = FuzzNow;
    options.cache_entries = 256;  // small: eviction is exercised too, memory stays flat
    auth = NewAttestedDocumentAuthenticator(std::move(options)).value();
  }
};

World& TheWorld() {
  static World* world = new World();  // never destroyed: libFuzzer exits without unwinding
  return *world;
}

void CheckAnswer(Authenticator& auth, const std::string& token) {
  AuthResult first = auth.Authenticate(token);
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& world = TheWorld();
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  if ((data[0] & 1) == 0) {
    CheckAnswer(*world.auth, std::string(rest));
    VerifySignedDocument(rest, world.ca.cert_pem(), "metadata.azure.com");
    ParseImdsTimestamp(rest);
  } else {
    CheckAnswer(*world.auth, testsupport::SignAttestedContent(rest, world.signer));
  }
  return 0;
}
