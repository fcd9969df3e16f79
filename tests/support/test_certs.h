// Real X.509 test certificates made with the OpenSSL 3 API: ECDSA P-256 keys (RSA-2048 leaves
// on request), SHA-256
// signatures, a CA and leaves it signs. Everything is PEM so it can go straight into
// grpc::SslServerCredentials, SSL_CTX or files for a subprocess.
//
//   TestCa ca = TestCa::Create();
//   CertAndKey lps = IssueLocalServerCert(ca, {kApiserverFqdn});
//   LeafOptions old;  old.dns_names = {"x"};  old.not_after = -std::chrono::hours(1);
//   CertAndKey expired = ca.IssueLeaf(old);
// Options structs throughout tests/support are filled by assignment: GCC 12's
// -Wmissing-field-initializers (-Wextra, -Werror) rejects designated initializers that skip
// members.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hotfix::testsupport {

// The apiserver FQDN the tests' nodes dial. Since AgentBaker #9351 the live-patching service
// presents a certificate for it, and nodes verify it (and send it as SNI).
inline constexpr char kApiserverFqdn[] = "myaks-dns-12345678.hcp.eastus.azmk8s.io";
// The name nodes pinned before #9351: a certificate carrying only it is refused unless
// hotfix-agent's --server-name asks for it.
inline constexpr char kLegacyLpsServerName[] = "aks-security-patch.data.mcr.microsoft.com";

struct CertAndKey {
  // The leaf first, then any intermediates up to (not including) the root.
  std::string cert_pem;
  // PKCS#8, unencrypted.
  std::string key_pem;
};

enum class KeyUsage {
  kServerAuth,           // EKU serverAuth, what a TLS server presents
  kClientAuth,           // EKU clientAuth
  kServerAndClientAuth,  // both, as Azure's TLS issuing CAs issue (IMDS's signer)
  kCodeSigning,          // a wrong EKU for a TLS server, to test the EKU check
  kNone,                 // no EKU extension at all (any purpose)
};

enum class KeyType {
  kEcP256,   // the default for every test certificate
  kRsa2048,  // what IMDS signs attested documents with
};

struct LeafOptions {
  std::string common_name = "test-leaf";
  KeyType key_type = KeyType::kEcP256;
  // subjectAltName entries; a name in common_name alone is not a SAN.
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // "127.0.0.1", "::1"
  KeyUsage usage = KeyUsage::kServerAuth;
  // Validity, relative to now: an expired leaf has not_after < 0, a future one not_before > 0.
  std::chrono::seconds not_before = -std::chrono::hours(1);
  std::chrono::seconds not_after = std::chrono::hours(24);
};

class TestCa {
 public:
  // A self-signed root: basicConstraints critical CA:TRUE, keyUsage keyCertSign+cRLSign.
  static TestCa Create(std::string_view common_name = "test-ca");

  TestCa(TestCa&&) noexcept;
  TestCa& operator=(TestCa&&) noexcept;
  ~TestCa();

  // A leaf signed by this CA; cert_pem also carries this CA's intermediates (none for a root).
  CertAndKey IssueLeaf(const LeafOptions& options) const;
  // An intermediate CA signed by this one; its leaves' cert_pem hold leaf + intermediate.
  TestCa IssueIntermediate(std::string_view common_name) const;

  // This CA's own certificate (the trust anchor for a root).
  const std::string& cert_pem() const;
  const std::string& key_pem() const;

 private:
  struct State;
  explicit TestCa(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A leaf for 127.0.0.1 / ::1 / localhost plus the given names: the usual test server cert.
CertAndKey IssueLocalServerCert(const TestCa& ca, std::vector<std::string> extra_dns_names = {});

struct PemPaths {
  std::filesystem::path cert;
  std::filesystem::path key;
};

// Writes <dir>/<basename>.crt and <dir>/<basename>.key (key mode 0600).
PemPaths WritePemFiles(const std::filesystem::path& dir, std::string_view basename,
                       const CertAndKey& cert);
// Writes one file, e.g. a CA bundle; returns its path.
std::filesystem::path WritePemFile(const std::filesystem::path& dir, std::string_view filename,
                                   std::string_view pem);

}  // namespace hotfix::testsupport
