#include "authenticate_and_admit.h"
#include "service/identity/attestation_roots.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "captured_log.h"
#include "imds_standin.h"
#include "temp_dir.h"
#include "test_certs.h"

namespace hotfix::service {
namespace {

using testsupport::CertAndKey;
using testsupport::IssueImdsSigner;
using testsupport::TempDir;
using testsupport::TestCa;

class AttestationRootsTest : public testing::Test {
 protected:
  AttestationRootsTest() { Replace(old_root_.cert_pem()); }

  // As a ConfigMap update or a careful operator writes it: a new file renamed over the old.
  void Replace(const std::string& pem) {
    dir_.Write("roots.pem.tmp", pem);
    std::filesystem::rename(dir_.File("roots.pem.tmp"), path());
  }
  std::string path() const { return dir_.File("roots.pem").string(); }

  std::unique_ptr<AttestationRoots> Load() {
    auto roots = AttestationRoots::Load(path(), AttestedDocumentOptions{});
    EXPECT_TRUE(roots.ok()) << roots.status().ToString();
    return roots.ok() ? std::move(roots).value() : nullptr;
  }

  static std::string Token(const CertAndKey& signer) {
    testsupport::AttestedDocumentFields fields;
    return testsupport::SignAttestedContent(testsupport::AttestedDocumentJson(fields), signer);
  }

  TempDir dir_{"attestation-roots"};
  TestCa old_root_ = TestCa::Create("old-imds-root");
  TestCa new_root_ = TestCa::Create("new-imds-root");
  CertAndKey old_signer_ = IssueImdsSigner(old_root_);
  CertAndKey new_signer_ = IssueImdsSigner(new_root_);
  // How many lines carry this message.
  int Logged(const std::string& msg) const {
    int n = 0;
    for (const std::string& m : log_.Messages()) n += m == msg;
    return n;
  }
  std::string LogText() const {
    std::string text;
    for (const std::string& m : log_.Messages()) text += m + "\n";
    return text;
  }

  unittest::CapturedLog log_;
};

TEST_F(AttestationRootsTest, AFileWithoutCertificatesIsRefusedAtStart) {
  Replace("not a certificate\n");
  auto roots = AttestationRoots::Load(path(), AttestedDocumentOptions{});
  ASSERT_FALSE(roots.ok());
  EXPECT_NE(roots.status().message().find("--attestation-roots " + path()), std::string::npos)
      << roots.status().message();
}

TEST_F(AttestationRootsTest, ChangedRootsVerifyFromTheNextCheck) {
  auto roots = Load();
  ASSERT_NE(roots, nullptr);
  EXPECT_TRUE(AuthenticateAndAdmit(*roots, Token(old_signer_)).ok());
  EXPECT_FALSE(AuthenticateAndAdmit(*roots, Token(new_signer_)).ok());
  const int64_t old_expiry = roots->not_after();
  EXPECT_GT(old_expiry, 0);

  Replace(new_root_.cert_pem());
  EXPECT_FALSE(AuthenticateAndAdmit(*roots, Token(new_signer_)).ok()) << "reloaded before a check";
  roots->ReloadIfChanged(&log_.logger());
  EXPECT_TRUE(AuthenticateAndAdmit(*roots, Token(new_signer_)).ok());
  // The old roots are gone, cached verdicts included.
  EXPECT_FALSE(AuthenticateAndAdmit(*roots, Token(old_signer_)).ok());
  EXPECT_TRUE(roots->last_reload_successful());
  EXPECT_EQ(Logged("attestation roots reloaded"), 1) << LogText();
}

TEST_F(AttestationRootsTest, ABadFileKeepsTheOldRootsAndSaysSo) {
  auto roots = Load();
  ASSERT_NE(roots, nullptr);
  const std::string token = Token(old_signer_);
  ASSERT_TRUE(AuthenticateAndAdmit(*roots, token).ok());
  const AuthenticatorStats before = roots->stats();

  Replace("-----BEGIN CERTIFICATE-----\nhalf written");
  roots->ReloadIfChanged(&log_.logger());
  EXPECT_FALSE(roots->last_reload_successful());
  EXPECT_TRUE(AuthenticateAndAdmit(*roots, token).ok());
  const std::string kept =
      "attestation roots changed but do not load; still verifying with the previous roots";
  EXPECT_EQ(Logged(kept), 1) << LogText();
  // Logged once, not at every check of the same bad file.
  roots->ReloadIfChanged(&log_.logger());
  EXPECT_EQ(Logged(kept), 1) << LogText();

  // Fixed: reloaded, and the counters carry on across the new authenticator.
  Replace(old_root_.cert_pem() + new_root_.cert_pem());
  roots->ReloadIfChanged(&log_.logger());
  EXPECT_TRUE(roots->last_reload_successful());
  EXPECT_EQ(roots->certificates(), 2u);
  EXPECT_TRUE(AuthenticateAndAdmit(*roots, Token(new_signer_)).ok());
  const AuthenticatorStats after = roots->stats();
  EXPECT_GE(after.verifications + after.cache_hits, before.verifications + before.cache_hits + 2);
}

TEST_F(AttestationRootsTest, AnUnchangedFileIsNotReread) {
  auto roots = Load();
  ASSERT_NE(roots, nullptr);
  roots->ReloadIfChanged(&log_.logger());
  roots->ReloadIfChanged(&log_.logger());
  EXPECT_TRUE(log_.Messages().empty()) << LogText();
}

}  // namespace
}  // namespace hotfix::service
