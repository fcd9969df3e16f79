#include "common/openssl.h"

#include <openssl/err.h>
#include <openssl/pem.h>

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

StatusOr<std::vector<X509Ptr>> ParsePemCertificates(std::string_view pem) {
  ERR_clear_error();
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the expected "no start line" at the end of the bundle
  if (certs.empty()) return Status::InvalidArgument("no PEM certificate found");
  return certs;
}

}  // namespace hotfix::ossl
