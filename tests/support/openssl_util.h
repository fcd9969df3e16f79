// Internal to lp_testsupport: RAII owners for OpenSSL objects and small helpers shared by the
// certificate, TLS and PKCS#7 code. Not part of any fixture's interface.
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

namespace hotfix::testsupport::ossl {

template <auto Fn>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Fn(p);
  }
};

using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using Pkcs7Ptr = std::unique_ptr<PKCS7, Deleter<PKCS7_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, Deleter<SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, Deleter<SSL_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;

// Drains OpenSSL's thread-local error queue into one line. Draining matters: a stale entry
// (e.g. PEM "no start line") would otherwise confuse the next SSL_get_error().
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
