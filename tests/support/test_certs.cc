#include "test_certs.h"

#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <fstream>
#include <stdexcept>

#include "openssl_util.h"

namespace hotfix::testsupport {

using ossl::Check;

struct TestCa::State {
  ossl::X509Ptr cert;
  ossl::PkeyPtr key;
  std::string cert_pem;
  std::string key_pem;
  // PEM of the intermediates between this CA and its root, this CA first; empty for a root.
  std::string chain_pem;
};

namespace {

ossl::PkeyPtr NewP256Key() {
  ossl::PkeyPtr key(EVP_EC_gen("P-256"));
  Check(key != nullptr, "generating P-256 key");
  return key;
}

ossl::PkeyPtr NewKey(KeyType type) {
  if (type == KeyType::kEcP256) return NewP256Key();
  ossl::PkeyPtr key(EVP_RSA_gen(2048));
  Check(key != nullptr, "generating RSA-2048 key");
  return key;
}

// 16 random bytes with the top bit clear: unique and positive, as RFC 5280 wants.
void SetRandomSerial(X509* cert) {
  unsigned char bytes[16];
  Check(RAND_bytes(bytes, sizeof(bytes)) == 1, "random serial");
  bytes[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(bytes, sizeof(bytes), nullptr);
  Check(bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != nullptr,
        "setting serial");
  BN_free(bn);
}

void SetSubjectCn(X509* cert, std::string_view cn) {
  X509_NAME* name = X509_get_subject_name(cert);
  Check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(cn.data()),
                                   static_cast<int>(cn.size()), -1, 0) == 1,
        "setting subject CN");
}

// Adds one extension in openssl.cnf syntax; ctx links subject and issuer for the key ids.
void AddExt(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  Check(ext != nullptr, "building extension " + value);
  Check(X509_add_ext(cert, ext, -1) == 1, "adding extension " + value);
  X509_EXTENSION_free(ext);
}

// A certificate skeleton: version 3, serial, validity, subject, public key.
ossl::X509Ptr NewCert(std::string_view cn, EVP_PKEY* subject_key, std::chrono::seconds not_before,
                      std::chrono::seconds not_after) {
  ossl::X509Ptr cert(X509_new());
  Check(cert != nullptr, "X509_new");
  Check(X509_set_version(cert.get(), X509_VERSION_3) == 1, "setting version");
  SetRandomSerial(cert.get());
  Check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), not_before.count()) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(cert.get()), not_after.count()) != nullptr,
        "setting validity");
  SetSubjectCn(cert.get(), cn);
  Check(X509_set_pubkey(cert.get(), subject_key) == 1, "setting public key");
  return cert;
}

void SignWith(X509* cert, X509* issuer, EVP_PKEY* issuer_key) {
  Check(X509_set_issuer_name(cert, X509_get_subject_name(issuer)) == 1, "setting issuer");
  Check(X509_sign(cert, issuer_key, EVP_sha256()) > 0, "signing certificate");
}

std::string SubjectAltName(const LeafOptions& options) {
  std::string san;
  for (const auto& dns : options.dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + dns;
  for (const auto& ip : options.ip_addresses) san += (san.empty() ? "IP:" : ",IP:") + ip;
  return san;
}

const char* EkuValue(KeyUsage usage) {
  switch (usage) {
    case KeyUsage::kServerAuth:
      return "serverAuth";
    case KeyUsage::kClientAuth:
      return "clientAuth";
    case KeyUsage::kServerAndClientAuth:
      return "serverAuth,clientAuth";
    case KeyUsage::kCodeSigning:
      return "codeSigning";
    case KeyUsage::kNone:
      return nullptr;
  }
  return nullptr;
}

// The CA extensions every CA here carries; self-signed when issuer == cert.
void AddCaExtensions(X509* cert, X509* issuer) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  AddExt(cert, &ctx, NID_basic_constraints, "critical,CA:TRUE");
  AddExt(cert, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExt(cert, &ctx, NID_subject_key_identifier, "hash");
  AddExt(cert, &ctx, NID_authority_key_identifier, "keyid:always");
}

}  // namespace

TestCa::TestCa(std::unique_ptr<State> state) : state_(std::move(state)) {}
TestCa::TestCa(TestCa&&) noexcept = default;
TestCa& TestCa::operator=(TestCa&&) noexcept = default;
TestCa::~TestCa() = default;

TestCa TestCa::Create(std::string_view common_name) {
  auto state = std::make_unique<State>();
  state->key = NewP256Key();
  state->cert =
      NewCert(common_name, state->key.get(), -std::chrono::hours(24), std::chrono::hours(24 * 365));
  AddCaExtensions(state->cert.get(), state->cert.get());
  SignWith(state->cert.get(), state->cert.get(), state->key.get());
  state->cert_pem = ossl::CertToPem(state->cert.get());
  state->key_pem = ossl::KeyToPem(state->key.get());
  return TestCa(std::move(state));
}

TestCa TestCa::IssueIntermediate(std::string_view common_name) const {
  auto state = std::make_unique<State>();
  state->key = NewP256Key();
  state->cert =
      NewCert(common_name, state->key.get(), -std::chrono::hours(24), std::chrono::hours(24 * 180));
  AddCaExtensions(state->cert.get(), state_->cert.get());
  SignWith(state->cert.get(), state_->cert.get(), state_->key.get());
  state->cert_pem = ossl::CertToPem(state->cert.get());
  state->key_pem = ossl::KeyToPem(state->key.get());
  state->chain_pem = state->cert_pem + state_->chain_pem;
  return TestCa(std::move(state));
}

CertAndKey TestCa::IssueLeaf(const LeafOptions& options) const {
  ossl::PkeyPtr key = NewKey(options.key_type);
  ossl::X509Ptr cert =
      NewCert(options.common_name, key.get(), options.not_before, options.not_after);
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, state_->cert.get(), cert.get(), nullptr, nullptr, 0);
  AddExt(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE");
  AddExt(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature,keyEncipherment");
  if (const char* eku = EkuValue(options.usage)) AddExt(cert.get(), &ctx, NID_ext_key_usage, eku);
  if (std::string san = SubjectAltName(options); !san.empty()) {
    AddExt(cert.get(), &ctx, NID_subject_alt_name, san);
  }
  AddExt(cert.get(), &ctx, NID_subject_key_identifier, "hash");
  AddExt(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always");
  SignWith(cert.get(), state_->cert.get(), state_->key.get());
  return CertAndKey{ossl::CertToPem(cert.get()) + state_->chain_pem, ossl::KeyToPem(key.get())};
}

const std::string& TestCa::cert_pem() const { return state_->cert_pem; }
const std::string& TestCa::key_pem() const { return state_->key_pem; }

CertAndKey IssueLocalServerCert(const TestCa& ca, std::vector<std::string> extra_dns_names) {
  LeafOptions options;
  options.common_name = extra_dns_names.empty() ? "localhost" : extra_dns_names.front();
  options.dns_names = std::move(extra_dns_names);
  options.dns_names.push_back("localhost");
  options.ip_addresses = {"127.0.0.1", "::1"};
  return ca.IssueLeaf(options);
}

std::filesystem::path WritePemFile(const std::filesystem::path& dir, std::string_view filename,
                                   std::string_view pem) {
  std::filesystem::path path = dir / filename;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(pem.data(), static_cast<std::streamsize>(pem.size()));
  out.close();
  if (!out) throw std::runtime_error("writing " + path.string());
  return path;
}

PemPaths WritePemFiles(const std::filesystem::path& dir, std::string_view basename,
                       const CertAndKey& cert) {
  PemPaths paths;
  paths.cert = WritePemFile(dir, std::string(basename) + ".crt", cert.cert_pem);
  paths.key = WritePemFile(dir, std::string(basename) + ".key", cert.key_pem);
  std::filesystem::permissions(
      paths.key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return paths;
}

}  // namespace hotfix::testsupport
