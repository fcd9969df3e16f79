// Internal to tests/support: the project's OpenSSL owners (common/openssl.h) and small
// helpers shared by the certificate, TLS and PKCS#7 code. Not part of any fixture's interface.
#pragma once

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pkcs7.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/openssl.h"

namespace hotfix::testsupport::ossl {

using hotfix::ossl::BioPtr;
using hotfix::ossl::Pkcs7Ptr;
using hotfix::ossl::PkeyPtr;
using hotfix::ossl::SslCtxPtr;
using hotfix::ossl::SslPtr;
using hotfix::ossl::StorePtr;
using hotfix::ossl::X509Ptr;

// hotfix::ossl::DrainErrors(), or "no OpenSSL error queued".
std::string DrainErrors();

// Throws std::runtime_error("<what>: <OpenSSL errors>") unless ok.
void Check(bool ok, std::string_view what);

// The whole content of a memory BIO.
std::string BioToString(BIO* bio);

X509Ptr ParseCertPem(std::string_view pem);
PkeyPtr ParseKeyPem(std::string_view pem);
std::string CertToPem(X509* cert);
std::string KeyToPem(EVP_PKEY* key);

// Standard base64 without line breaks, and its inverse (nullopt-like empty + false on error).
std::string Base64Encode(std::string_view raw);
bool Base64Decode(std::string_view encoded, std::string* raw);

// Loads a certificate chain (leaf first) and key into a server context.
void UseCertAndKey(SSL_CTX* ctx, std::string_view chain_pem, std::string_view key_pem);

}  // namespace hotfix::testsupport::ossl
