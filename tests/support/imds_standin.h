// ImdsStandin: the Azure Instance Metadata Service's attested-document contract, served on
// loopback by cpp-httplib, with per-test fault modes (all setters are thread-safe).
//
//   GET /metadata/attested/document?api-version=2025-04-07[&nonce=...]   "Metadata: true"
//   -> 200 application/json {"encoding":"pkcs7","signature":"<base64 DER PKCS#7 SignedData>"}
//   The SignedData embeds the signer certificate and, as content, the JSON document
//   {"licenseType":"","nonce":"...","plan":{...},"sku":"...","subscriptionId":"...",
//    "timeStamp":{"createdOn":"MM/DD/YY HH:MM:SS -0000","expiresOn":"..."},"vmId":"..."}.
//   Without "Metadata: true": 400 {"error":"Bad request. Required metadata header not specified"}
//   Without api-version: 400 with IMDS's "api-version was not specified" body.
//
//   ImdsStandin imds;                       // signer generated for metadata.azure.com
//   imds.FailFirst(1, 500);                 // 500, then 200
//   ... client GETs imds.document_url() ...
//   imds.requests()[0].Header("Metadata") == "true"
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "recorder.h"
#include "test_certs.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hotfix::testsupport {

inline constexpr char kImdsAttestedPath[] = "/metadata/attested/document";
inline constexpr char kImdsApiVersion[] = "2025-04-07";
inline constexpr char kImdsMissingHeaderBody[] =
    R"({"error":"Bad request. Required metadata header not specified"})";

struct ImdsBehavior {
  // Wait before any answer (ends early when the stand-in stops).
  std::chrono::milliseconds delay{0};
  // How many requests, counted from now, wait `delay`; -1: every request. (1 makes only the
  // first attempt slow, so a client's retry gets a prompt answer.)
  int delayed_requests = -1;
  // Answer this status instead of 200 (the body stays the document unless `body` is set).
  std::optional<int> status;
  // Serve this body instead of the signed document (e.g. {"signature":""}, "not json").
  std::optional<std::string> body;
  // Serve the signed document padded with a trailing "padding" field to exactly N bytes
  // (still valid JSON), or cut to N bytes when the document is longer (then invalid).
  std::optional<size_t> body_size;
  // The next N valid requests get failure_status (body {"error":"stand-in failure"}).
  int failures_before_success = 0;
  int failure_status = 500;
  // Redirect every valid request here with redirect_status.
  std::optional<std::string> redirect_location;
  int redirect_status = 302;
};

struct ImdsRequest {
  std::string method;
  std::string target;  // the request line's target as sent
  std::string path;
  std::multimap<std::string, std::string> params;
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  std::string remote_addr;

  // First value of a header, matched case-insensitively; "" if absent.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
  // Signs of a forward proxy: an absolute-form target (GET http://host/...) or
  // Via / Proxy-* / X-Forwarded-For headers.
  bool LooksProxied() const;
};

struct ImdsStandinOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  // The PKCS#7 signer; empty: a leaf for metadata.azure.com from a generated test root.
  CertAndKey signer;
  std::string vm_id = "02aab8a4-74ef-476e-8182-f6d2ba4166a6";
  std::string subscription_id = "8d10da13-8125-4ba9-a717-bf7490507b3d";
  std::string sku = "aks-ubuntu-2204gen2containerd";
  ImdsBehavior behavior;
};

class ImdsStandin {
 public:
  // Listening when this returns; throws std::runtime_error if it cannot bind.
  explicit ImdsStandin(ImdsStandinOptions options = {});
  ~ImdsStandin();
  ImdsStandin(const ImdsStandin&) = delete;
  ImdsStandin& operator=(const ImdsStandin&) = delete;

  uint16_t port() const { return port_; }
  std::string base_url() const;      // "http://127.0.0.1:<port>"
  std::string document_url() const;  // base_url() + path + "?api-version=2025-04-07"

  void SetBehavior(ImdsBehavior behavior);
  ImdsBehavior behavior() const;
  void SetDelay(std::chrono::milliseconds delay, int requests = -1);
  void SetStatus(std::optional<int> status);
  void SetBody(std::optional<std::string> body);
  void SetBodySize(std::optional<size_t> size);
  void FailFirst(int failures, int status = 500);
  void SetRedirect(std::optional<std::string> location, int status = 302);
  void Reset();  // default behaviour, forget requests

  // Every request received (any path), recorded before it is answered.
  std::vector<ImdsRequest> requests() const;
  size_t request_count() const;
  bool WaitForRequests(size_t n, std::chrono::milliseconds timeout) const;
  // The signature strings of every 200 document served, in order.
  std::vector<std::string> served_signatures() const;

  // The signer certificate, and the root that issued it when generated (else empty).
  const std::string& signer_cert_pem() const { return signer_.cert_pem; }
  const std::string& signer_ca_pem() const { return signer_ca_pem_; }

  void Stop();

 private:
  void HandleDocument(const httplib::Request& req, httplib::Response& res);
  bool ValidateRequest(const httplib::Request& req, httplib::Response& res);
  bool ApplyFaults(httplib::Response& res);
  std::string SignedDocumentBody(const std::string& nonce);
  void Record(const httplib::Request& req);
  void SleepUnlessStopping(std::chrono::milliseconds delay) const;
  std::chrono::milliseconds TakeDelay();

  ImdsStandinOptions options_;
  CertAndKey signer_;
  std::string signer_ca_pem_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  ImdsBehavior behavior_;
  Recorder<ImdsRequest> requests_;
  std::vector<std::string> served_signatures_;
  bool stopping_ = false;
  uint16_t port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

// ---- Making documents, as IMDS does (the stand-in serves these) ----------------------------

// IMDS's timestamp shape, "MM/DD/YY HH:MM:SS -0000", in UTC.
std::string ImdsTimestamp(std::chrono::system_clock::time_point t);

// The attested JSON document's fields; times default to now and now + 6 hours, as IMDS.
struct AttestedDocumentFields {
  std::string vm_id = "02aab8a4-74ef-476e-8182-f6d2ba4166a6";
  std::string subscription_id = "8d10da13-8125-4ba9-a717-bf7490507b3d";
  std::string sku = "aks-ubuntu-2204gen2containerd";
  std::string nonce;  // empty: the creation time, "YYYYMMDD-HHMMSS", as IMDS
  std::chrono::system_clock::time_point created_on = std::chrono::system_clock::now();
  std::chrono::system_clock::time_point expires_on = created_on + std::chrono::hours(6);
};
// {"licenseType":"","nonce":...,"plan":{...},"sku":...,"subscriptionId":...,
//  "timeStamp":{"createdOn":...,"expiresOn":...},"vmId":...}
std::string AttestedDocumentJson(const AttestedDocumentFields& fields);

// The `signature` IMDS returns for `content`: base64 of DER PKCS#7 SignedData, content
// attached, the signer's certificate embedded (its intermediates are not, as with IMDS).
std::string SignAttestedContent(std::string_view content, const CertAndKey& signer);

// The signer the stand-in generates: a leaf for `name` (CN and DNS SAN) with the EKUs serverAuth
// and clientAuth, as IMDS's certificate from Azure's TLS issuing CAs.
CertAndKey IssueImdsSigner(const TestCa& ca, std::string_view name = "metadata.azure.com",
                           KeyType key_type = KeyType::kEcP256);
// Its options, for a test to change (validity, names) before TestCa::IssueLeaf.
LeafOptions ImdsSignerLeaf(std::string_view name = "metadata.azure.com",
                           KeyType key_type = KeyType::kEcP256);

// ---- Checking them ----------------------------------------------------------------------

// Decodes an attested-document signature (base64 of DER PKCS#7 SignedData), verifies it
// against the PEM trust anchors, and returns the signed JSON content. A verifier's view, for
// tests: the service's own signature check (service::VerifySignedDocument) without its name,
// content and expiry checks.
struct AttestedContent {
  bool ok = false;
  std::string error;
  std::string json;            // the signed content
  std::string signer_subject;  // e.g. "CN=metadata.azure.com"
};
AttestedContent VerifyAttestedSignature(std::string_view signature_base64,
                                        std::string_view trust_pem);

}  // namespace hotfix::testsupport
