#include "common/openssl.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <cstring>

#include "common/text.h"

namespace hotfix::ossl {

std::string DrainErrors() {
  std::string out;
  const char* data = nullptr;
  int flags = 0;
  while (unsigned long err = ERR_get_error_all(nullptr, nullptr, nullptr, &data, &flags)) {
    char buf[256];
    ERR_error_string_n(err, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
    if ((flags & ERR_TXT_STRING) != 0 && data != nullptr && *data != '\0') {
      out += std::string(" (") + data + ")";
    }
  }
  return out;
}

std::string DrainErrorsOr(std::string_view fallback) {
  std::string errors = DrainErrors();
  return errors.empty() ? std::string(fallback) : errors;
}

StatusOr<std::vector<X509Ptr>> ParsePemCertificates(std::string_view pem) {
  ERR_clear_error();
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Status::Internal("BIO_new_mem_buf: " + DrainErrorsOr("out of memory"));
  std::vector<X509Ptr> certs;
  while (true) {
    const int before = BIO_pending(bio.get());
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* data = nullptr;
    long len = 0;
    if (PEM_read_bio(bio.get(), &name, &header, &data, &len) == 1) {
      if (std::strcmp(name, "CERTIFICATE") == 0 && header[0] == '\0') {
        const unsigned char* p = data;
        X509Ptr cert(d2i_X509(nullptr, &p, len));
        if (cert && p == data + len) certs.push_back(std::move(cert));  // no trailing bytes
      }
      OPENSSL_free(name);
      OPENSSL_free(header);
      OPENSSL_free(data);
      continue;
    }
    // "no start line" is the end of the input; a malformed block is skipped, as Go does.
    const unsigned long err = ERR_peek_last_error();
    const bool end = ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE;
    if (end || BIO_pending(bio.get()) == before || BIO_pending(bio.get()) == 0) break;
  }
  ERR_clear_error();
  if (certs.empty()) return Status::InvalidArgument("no PEM certificate found");
  return certs;
}

std::optional<Sha256Digest> Sha256(const EVP_MD* sha256, std::string_view bytes) {
  Sha256Digest digest;
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &len, sha256, nullptr) != 1 ||
      len != digest.size()) {
    ERR_clear_error();
    return std::nullopt;
  }
  return digest;
}

namespace {

std::string Hex(const Sha256Digest& digest) {
  std::string hex;
  for (unsigned char byte : digest) {
    hex.push_back(kLowerHexDigits[byte >> 4]);
    hex.push_back(kLowerHexDigits[byte & 0xf]);
  }
  return hex;
}

}  // namespace

std::string Sha256Hex(std::string_view bytes) {
  const std::optional<Sha256Digest> digest = Sha256(EVP_sha256(), bytes);
  return digest ? Hex(*digest) : "";
}

Sha256Stream::Sha256Stream() : ctx_(EVP_MD_CTX_new()) {
  failed_ = !ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1;
}

void Sha256Stream::Update(std::string_view bytes) {
  if (!failed_ && EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) != 1) failed_ = true;
}

std::string Sha256Stream::FinishHex() {
  Sha256Digest digest;
  unsigned int len = 0;
  if (failed_ || EVP_DigestFinal_ex(ctx_.get(), digest.data(), &len) != 1 || len != digest.size()) {
    ERR_clear_error();
    failed_ = true;
    return "";
  }
  failed_ = true;  // finished: a second call would read a spent context
  return Hex(digest);
}

}  // namespace hotfix::ossl
