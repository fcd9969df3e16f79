// Self-test of ImdsStandin and the imds-standin binary with a cpp-httplib client: IMDS's
// header rule, a real PKCS#7 signature over the attested JSON, and every fault mode.
#include "imds_standin.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pkcs7.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "bin_dir.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "wait.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

const std::string kDocumentPath =
    std::string(kImdsAttestedPath) + "?api-version=" + kImdsApiVersion;

httplib::Result Get(uint16_t port, const std::string& path, bool metadata_header = true) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(kGenerous);
  httplib::Headers headers;
  if (metadata_header) headers.emplace("Metadata", "true");
  return client.Get(path, headers);
}

// Independent of the stand-in's own helper: base64 -> DER PKCS#7 -> the embedded content.
std::string SignedContentOf(const std::string& signature) {
  std::string der(signature.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(der.data()),
                          reinterpret_cast<const unsigned char*>(signature.data()),
                          static_cast<int>(signature.size()));
  if (n < 0) return "<not base64>";
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  PKCS7* p7 = d2i_PKCS7(nullptr, &p, n);
  if (!p7 || !PKCS7_type_is_signed(p7)) return "<not PKCS#7 SignedData>";
  ASN1_OCTET_STRING* content = p7->d.sign->contents->d.data;
  std::string out(reinterpret_cast<const char*>(content->data), content->length);
  PKCS7_free(p7);
  return out;
}

std::string SignatureOf(const std::string& body) {
  return nlohmann::json::parse(body)["signature"].get<std::string>();
}

class ImdsStandinTest : public ::testing::Test {
 protected:
  ImdsStandin imds_;
};

TEST_F(ImdsStandinTest, RefusesRequestsWithoutTheMetadataHeader) {
  auto res = Get(imds_.port(), kDocumentPath, /*metadata_header=*/false);
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(res->body, R"({"error":"Bad request. Required metadata header not specified"})");
  EXPECT_THAT(res->get_header_value("Content-Type"), HasSubstr("application/json"));
  EXPECT_TRUE(imds_.served_signatures().empty());
}

TEST_F(ImdsStandinTest, RefusesRequestsWithoutApiVersion) {
  auto res = Get(imds_.port(), kImdsAttestedPath);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_THAT(res->body, HasSubstr("api-version was not specified"));
}

TEST_F(ImdsStandinTest, ServesAPkcs7SignedAttestedDocument) {
  auto res = Get(imds_.port(), kDocumentPath + "&nonce=1234567890");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_THAT(res->get_header_value("Content-Type"), HasSubstr("application/json"));
  auto body = nlohmann::json::parse(res->body);
  EXPECT_EQ(body["encoding"], "pkcs7");
  std::string signature = body["signature"];
  EXPECT_THAT(signature, MatchesRegex("[A-Za-z0-9+/]+=*"));
  EXPECT_EQ(imds_.served_signatures(), std::vector<std::string>{signature});

  auto doc = nlohmann::json::parse(SignedContentOf(signature));
  EXPECT_EQ(doc["nonce"], "1234567890");
  EXPECT_EQ(doc["vmId"], "02aab8a4-74ef-476e-8182-f6d2ba4166a6");
  EXPECT_EQ(doc["licenseType"], "");
  EXPECT_TRUE(doc["plan"].contains("publisher"));
  EXPECT_TRUE(doc.contains("subscriptionId"));
  EXPECT_TRUE(doc.contains("sku"));
  const std::string stamp = R"(\d\d/\d\d/\d\d \d\d:\d\d:\d\d -0000)";
  EXPECT_TRUE(
      std::regex_match(doc["timeStamp"]["createdOn"].get<std::string>(), std::regex(stamp)));
  EXPECT_TRUE(
      std::regex_match(doc["timeStamp"]["expiresOn"].get<std::string>(), std::regex(stamp)));

  AttestedContent verified = VerifyAttestedSignature(signature, imds_.signer_ca_pem());
  ASSERT_TRUE(verified.ok) << verified.error;
  EXPECT_EQ(verified.json, SignedContentOf(signature));
  EXPECT_THAT(verified.signer_subject, HasSubstr("CN=metadata.azure.com"));
}

TEST_F(ImdsStandinTest, SignatureFailsAgainstAnotherRoot) {
  auto res = Get(imds_.port(), kDocumentPath);
  ASSERT_TRUE(res);
  std::string signature = SignatureOf(res->body);
  TestCa other = TestCa::Create("other-root");
  EXPECT_FALSE(VerifyAttestedSignature(signature, other.cert_pem()).ok);
  EXPECT_FALSE(VerifyAttestedSignature("not base64!", imds_.signer_ca_pem()).ok);
}

TEST_F(ImdsStandinTest, DefaultNonceIsTheTimestamp) {
  auto res = Get(imds_.port(), kDocumentPath);
  ASSERT_TRUE(res);
  auto doc = nlohmann::json::parse(SignedContentOf(SignatureOf(res->body)));
  EXPECT_TRUE(std::regex_match(doc["nonce"].get<std::string>(), std::regex(R"(\d{8}-\d{6})")));
}

TEST_F(ImdsStandinTest, RecordsHeadersOfDirectRequests) {
  ASSERT_TRUE(Get(imds_.port(), kDocumentPath));
  ASSERT_EQ(imds_.request_count(), 1u);
  ImdsRequest r = imds_.requests()[0];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, kImdsAttestedPath);
  EXPECT_EQ(r.target, kDocumentPath);
  EXPECT_EQ(r.Header("metadata"), "true");  // case-insensitive lookup
  EXPECT_EQ(r.remote_addr, "127.0.0.1");
  EXPECT_FALSE(r.LooksProxied());
}

TEST_F(ImdsStandinTest, DetectsARequestThatCameThroughAProxy) {
  // The stand-in plays the proxy here: a proxied request carries an absolute-form target.
  httplib::Client client("169.254.169.254", 80);
  client.set_proxy("127.0.0.1", imds_.port());
  client.Get(kDocumentPath, httplib::Headers{{"Metadata", "true"}});
  ASSERT_EQ(imds_.request_count(), 1u);
  ImdsRequest r = imds_.requests()[0];
  EXPECT_THAT(r.target, HasSubstr("http://169.254.169.254"));
  EXPECT_TRUE(r.LooksProxied());
}

TEST_F(ImdsStandinTest, FailsFirstThenSucceeds) {
  imds_.FailFirst(2, 500);
  EXPECT_EQ(Get(imds_.port(), kDocumentPath)->status, 500);
  EXPECT_EQ(Get(imds_.port(), kDocumentPath)->status, 500);
  EXPECT_EQ(Get(imds_.port(), kDocumentPath)->status, 200);
  EXPECT_EQ(imds_.request_count(), 3u);
  EXPECT_EQ(imds_.served_signatures().size(), 1u);
}

TEST_F(ImdsStandinTest, HeaderlessRequestsDoNotConsumeFailures) {
  imds_.FailFirst(1, 503);
  EXPECT_EQ(Get(imds_.port(), kDocumentPath, false)->status, 400);
  EXPECT_EQ(Get(imds_.port(), kDocumentPath)->status, 503);
}

TEST_F(ImdsStandinTest, StatusOverrideAndCustomBody) {
  imds_.SetStatus(404);
  EXPECT_EQ(Get(imds_.port(), kDocumentPath)->status, 404);
  imds_.SetStatus(std::nullopt);
  imds_.SetBody(R"({"encoding":"pkcs7","signature":""})");
  auto res = Get(imds_.port(), kDocumentPath);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, R"({"encoding":"pkcs7","signature":""})");
}

TEST_F(ImdsStandinTest, BodyOfExactSize) {
  imds_.SetBodySize(2 * 1024 * 1024);  // beyond a 1 MiB client cap
  auto big = Get(imds_.port(), kDocumentPath);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->body.size(), 2u * 1024 * 1024);
  auto json = nlohmann::json::parse(big->body);  // still valid: padded, not cut
  EXPECT_FALSE(json["signature"].get<std::string>().empty());
  imds_.SetBodySize(10);
  auto small = Get(imds_.port(), kDocumentPath);
  EXPECT_EQ(small->body, R"({"encoding)");
}

TEST_F(ImdsStandinTest, Redirects) {
  imds_.SetRedirect("http://127.0.0.1:1/elsewhere", 307);
  auto res = Get(imds_.port(), kDocumentPath);  // httplib does not follow by default
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 307);
  EXPECT_EQ(res->get_header_value("Location"), "http://127.0.0.1:1/elsewhere");
}

TEST_F(ImdsStandinTest, DelayOutlastsAShortClientTimeout) {
  imds_.SetDelay(std::chrono::seconds(30));
  httplib::Client client("127.0.0.1", imds_.port());
  client.set_read_timeout(std::chrono::milliseconds(300));
  auto res = client.Get(kDocumentPath, httplib::Headers{{"Metadata", "true"}});
  EXPECT_FALSE(res);
  EXPECT_EQ(imds_.request_count(), 1u);
  // Teardown must not wait out the 30 s delay: Stop() ends it (the ctest TIMEOUT guards).
}

TEST_F(ImdsStandinTest, ResetForgetsRequestsAndFaults) {
  imds_.SetStatus(500);
  Get(imds_.port(), kDocumentPath);
  imds_.Reset();
  EXPECT_EQ(imds_.request_count(), 0u);
  EXPECT_EQ(Get(imds_.port(), kDocumentPath)->status, 200);
}

TEST(ImdsStandinSignerTest, UsesAGivenSigner) {
  TestCa ca = TestCa::Create("my-imds-root");
  LeafOptions leaf;
  leaf.common_name = "metadata.azure.com";
  leaf.dns_names = {"metadata.azure.com"};
  leaf.usage = KeyUsage::kServerAndClientAuth;
  ImdsStandinOptions options;
  options.signer = ca.IssueLeaf(leaf);
  options.vm_id = "vm-under-test";
  ImdsStandin imds(options);
  EXPECT_EQ(imds.signer_ca_pem(), "");
  auto res = Get(imds.port(), kDocumentPath);
  ASSERT_TRUE(res);
  AttestedContent verified = VerifyAttestedSignature(SignatureOf(res->body), ca.cert_pem());
  ASSERT_TRUE(verified.ok) << verified.error;
  EXPECT_EQ(nlohmann::json::parse(verified.json)["vmId"], "vm-under-test");
}

// --- imds-standin binary -------------------------------------------------------------------

// The port from "imds-standin listening on http://127.0.0.1:<port>", 0 if it never came.
uint16_t WaitForPort(Subprocess& process) {
  const std::string prefix = "listening on http://127.0.0.1:";
  auto until = std::chrono::steady_clock::now() + kGenerous;
  while (std::chrono::steady_clock::now() < until && process.running()) {
    std::string out = process.Stdout();
    size_t at = out.find(prefix);
    if (at != std::string::npos && out.find('\n', at) != std::string::npos) {
      return static_cast<uint16_t>(std::stoi(out.substr(at + prefix.size())));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

TEST(ImdsStandinBinaryTest, ServesSignedDocumentsAndStopsCleanly) {
  TempDir dir;
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/imds-standin", "--listen", "127.0.0.1:0", "--write-signer-ca",
                dir.File("imds-ca.pem").string()};
  Subprocess process(spawn);
  uint16_t port = WaitForPort(process);
  ASSERT_NE(port, 0) << process.Stderr();
  EXPECT_EQ(Get(port, kDocumentPath, false)->status, 400);
  auto res = Get(port, kDocumentPath);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  AttestedContent verified =
      VerifyAttestedSignature(SignatureOf(res->body), dir.Read("imds-ca.pem"));
  EXPECT_TRUE(verified.ok) << verified.error;
  ExitStatus status = process.Stop();
  EXPECT_TRUE(status.success()) << status.ToString();
  EXPECT_THAT(process.Stderr(), HasSubstr("metadata=\"true\" proxied=no"));
}

TEST(ImdsStandinBinaryTest, UsesGivenSignerFiles) {
  TempDir dir;
  TestCa ca = TestCa::Create("demo-imds-root");
  LeafOptions leaf;
  leaf.common_name = "metadata.azure.com";
  leaf.dns_names = {"metadata.azure.com"};
  leaf.usage = KeyUsage::kServerAndClientAuth;
  PemPaths signer = WritePemFiles(dir.path(), "signer", ca.IssueLeaf(leaf));
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/imds-standin",
                "--listen",
                "127.0.0.1:0",
                "--signer-cert",
                signer.cert.string(),
                "--signer-key",
                signer.key.string(),
                "--fail-first",
                "1"};
  Subprocess process(spawn);
  uint16_t port = WaitForPort(process);
  ASSERT_NE(port, 0) << process.Stderr();
  EXPECT_EQ(Get(port, kDocumentPath)->status, 500);
  auto res = Get(port, kDocumentPath);
  ASSERT_EQ(res->status, 200);
  EXPECT_TRUE(VerifyAttestedSignature(SignatureOf(res->body), ca.cert_pem()).ok);
}

}  // namespace
}  // namespace hotfix::testsupport
