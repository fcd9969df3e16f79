#include "openssl_util.h"

#include <openssl/pem.h>

#include <vector>

namespace hotfix::testsupport::ossl {

std::string DrainErrors() {
  std::string errors = hotfix::ossl::DrainErrors();
  return errors.empty() ? "no OpenSSL error queued" : errors;
}

void Check(bool ok, std::string_view what) {
  if (!ok) throw std::runtime_error(std::string(what) + ": " + DrainErrors());
}

std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string(data, static_cast<size_t>(len)) : std::string();
}

X509Ptr ParseCertPem(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  Check(cert != nullptr, "parsing certificate PEM");
  return cert;
}

PkeyPtr ParseKeyPem(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  Check(key != nullptr, "parsing private key PEM");
  return key;
}

std::string CertToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_X509(bio.get(), cert) == 1, "writing certificate PEM");
  return BioToString(bio.get());
}

std::string KeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "writing private key PEM");
  return BioToString(bio.get());
}

std::string Base64Encode(std::string_view raw) {
  std::vector<unsigned char> out(4 * ((raw.size() + 2) / 3) + 1);
  int n = EVP_EncodeBlock(out.data(), reinterpret_cast<const unsigned char*>(raw.data()),
                          static_cast<int>(raw.size()));
  return std::string(reinterpret_cast<char*>(out.data()), static_cast<size_t>(n));
}

bool Base64Decode(std::string_view encoded, std::string* raw) {
  if (encoded.size() % 4 != 0) return false;
  std::vector<unsigned char> out(3 * (encoded.size() / 4) + 1);
  int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(encoded.data()),
                          static_cast<int>(encoded.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts padding as zero bytes; drop them.
  size_t len = static_cast<size_t>(n);
  for (size_t i = encoded.size(); i > 0 && encoded[i - 1] == '='; --i) --len;
  raw->assign(reinterpret_cast<char*>(out.data()), len);
  return true;
}

void UseCertAndKey(SSL_CTX* ctx, std::string_view chain_pem, std::string_view key_pem) {
  BioPtr bio(BIO_new_mem_buf(chain_pem.data(), static_cast<int>(chain_pem.size())));
  X509Ptr leaf(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  Check(leaf != nullptr, "parsing server certificate");
  Check(SSL_CTX_use_certificate(ctx, leaf.get()) == 1, "using server certificate");
  // Everything after the leaf is an intermediate to send along.
  while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    Check(SSL_CTX_add0_chain_cert(ctx, extra) == 1, "adding chain certificate");
  }
  ERR_clear_error();  // the loop ends on a queued "no start line"
  PkeyPtr key = ParseKeyPem(key_pem);
  Check(SSL_CTX_use_PrivateKey(ctx, key.get()) == 1, "using server key");
}

}  // namespace hotfix::testsupport::ossl
