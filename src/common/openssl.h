// OpenSSL objects owned by std::unique_ptr, and OpenSSL's error queue as text: one copy for
// the node's TLS dialer, the service and the tests.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pkcs7.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hotfix::ossl {

template <auto Fn>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Fn(p);
  }
};

// BIO_free_all: a chain (a base64 filter over a memory BIO) goes with its head.
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using MdPtr = std::unique_ptr<EVP_MD, Deleter<EVP_MD_free>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Deleter<EVP_MD_CTX_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Pkcs7Ptr = std::unique_ptr<PKCS7, Deleter<PKCS7_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, Deleter<SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, Deleter<SSL_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;

// Empties this thread's OpenSSL error queue into one line: each error's text, with its data
// text in parentheses (where the useful part is: "Verify error:certificate has expired"),
// joined by "; ". "" if nothing was queued. Every failure path drains the queue, into a
// message or away: it is per thread and outlives the call, so a stale entry would be read as
// the next call's failure (gRPC's own TLS on the same thread, or the next SSL_get_error()).
std::string DrainErrors();
// DrainErrors(), or `fallback` when nothing was queued (a failure OpenSSL did not explain, e.g.
// a peer that closed the connection mid-handshake), so that a message never ends in ": ".
std::string DrainErrorsOr(std::string_view fallback);

// The certificates of a PEM bundle, in order, by the rules of Go's x509.CertPool.AppendCertsFromPEM
// (what the reference trusts its cluster CA with): every "CERTIFICATE" block without headers whose
// DER parses with nothing after it; other block types (keys, CRLs), blocks with headers (encrypted
// PEM), undecodable blocks and text between blocks are skipped. A bundle that yields none is
// InvalidArgument "no PEM certificate found". Leaves OpenSSL's error queue empty.
StatusOr<std::vector<X509Ptr>> ParsePemCertificates(std::string_view pem);

// SHA-256 of bytes as 64 lower-case hex digits ("" only if libcrypto itself fails).
std::string Sha256Hex(std::string_view bytes);

// SHA-256 of bytes with `sha256` fetched once by the caller (EVP_MD_fetch): an implicit fetch
// per digest costs a provider lookup, which the identity's hot path does not pay. nullopt
// only if libcrypto itself fails (its error queue then cleared).
using Sha256Digest = std::array<unsigned char, 32>;
// A hash-table hash of a Sha256Digest: its first 8 bytes (SHA-256 output is already uniform,
// so any 8 of its bytes are a good hash).
struct Sha256DigestHash {
  size_t operator()(const Sha256Digest& digest) const {
    size_t h;
    std::memcpy(&h, digest.data(), sizeof(h));
    return h;
  }
};
std::optional<Sha256Digest> Sha256(const EVP_MD* sha256, std::string_view bytes);

// SHA-256 of bytes that arrive piece by piece (a package streamed to disk as it downloads).
class Sha256Stream {
 public:
  Sha256Stream();
  void Update(std::string_view bytes);
  // The digest of everything given, as 64 lower-case hex digits; "" if libcrypto failed at any
  // step. Call once.
  std::string FinishHex();

 private:
  MdCtxPtr ctx_;
  bool failed_ = false;
};

}  // namespace hotfix::ossl
