#include "imds_standin.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <strings.h>

#include <ctime>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "openssl_util.h"
#include "service/identity/node_identity.h"
#include "service/identity/signed_document.h"

namespace hotfix::testsupport {
namespace {

constexpr char kJsonType[] = "application/json; charset=utf-8";
constexpr char kMissingApiVersionBody[] =
    R"({"error":"Bad request. api-version was not specified in the request. For more )"
    R"(information refer to aka.ms/azureimds","newest-versions":["2025-04-07","2024-07-17"]})";
constexpr char kForwardedBody[] =
    R"({"error":"Bad request. X-Forwarded-For header is not allowed"})";

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string FormatUtc(std::chrono::system_clock::time_point t, const char* format) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, format);
  return out.str();
}

// Pads a JSON object with a trailing field, or cuts it, to exactly `size` bytes.
std::string FitToSize(std::string json, size_t size) {
  constexpr std::string_view kPad = R"(,"padding":"")";
  if (json.size() + kPad.size() > size) {
    json.resize(size, ' ');
    return json;
  }
  json.pop_back();  // the closing brace
  json += R"(,"padding":")";
  json.append(size - json.size() - 2, 'x');
  return json + "\"}";
}

std::string JoinHost(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

std::string ImdsTimestamp(std::chrono::system_clock::time_point t) {
  return FormatUtc(t, "%m/%d/%y %H:%M:%S -0000");
}

std::string AttestedDocumentJson(const AttestedDocumentFields& fields) {
  nlohmann::json doc = {
      {"licenseType", ""},
      {"nonce",
       fields.nonce.empty() ? FormatUtc(fields.created_on, "%Y%m%d-%H%M%S") : fields.nonce},
      {"plan", {{"name", ""}, {"product", ""}, {"publisher", ""}}},
      {"sku", fields.sku},
      {"subscriptionId", fields.subscription_id},
      {"timeStamp",
       {{"createdOn", ImdsTimestamp(fields.created_on)},
        {"expiresOn", ImdsTimestamp(fields.expires_on)}}},
      {"vmId", fields.vm_id}};
  return doc.dump();
}

std::string SignAttestedContent(std::string_view content, const CertAndKey& signer) {
  ossl::X509Ptr cert = ossl::ParseCertPem(signer.cert_pem);
  ossl::PkeyPtr key = ossl::ParseKeyPem(signer.key_pem);
  ossl::BioPtr in(BIO_new_mem_buf(content.data(), static_cast<int>(content.size())));
  // Attached content (no PKCS7_DETACHED) and the signer certificate included, as IMDS does.
  ossl::Pkcs7Ptr p7(PKCS7_sign(cert.get(), key.get(), nullptr, in.get(), PKCS7_BINARY));
  ossl::Check(p7 != nullptr, "PKCS7_sign");
  ossl::BioPtr der(BIO_new(BIO_s_mem()));
  ossl::Check(i2d_PKCS7_bio(der.get(), p7.get()) == 1, "encoding PKCS#7 DER");
  return ossl::Base64Encode(ossl::BioToString(der.get()));
}

LeafOptions ImdsSignerLeaf(std::string_view name, KeyType key_type) {
  LeafOptions leaf;
  leaf.common_name = std::string(name);
  leaf.key_type = key_type;
  leaf.dns_names = {std::string(name)};
  leaf.usage = KeyUsage::kServerAndClientAuth;
  return leaf;
}

CertAndKey IssueImdsSigner(const TestCa& ca, std::string_view name, KeyType key_type) {
  return ca.IssueLeaf(ImdsSignerLeaf(name, key_type));
}

std::string ImdsRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

bool ImdsRequest::HasHeader(std::string_view name) const {
  for (const auto& header : headers) {
    if (EqualsIgnoreCase(header.first, name)) return true;
  }
  return false;
}

bool ImdsRequest::LooksProxied() const {
  if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) return true;
  for (const char* h :
       {"Via", "X-Forwarded-For", "Forwarded", "Proxy-Connection", "Proxy-Authorization"}) {
    if (HasHeader(h)) return true;
  }
  return false;
}

ImdsStandin::ImdsStandin(ImdsStandinOptions options)
    : options_(std::move(options)), behavior_(options_.behavior) {
  signer_ = options_.signer;
  if (signer_.cert_pem.empty()) {
    TestCa root = TestCa::Create("test-imds-root");
    signer_ = IssueImdsSigner(root);
    signer_ca_pem_ = root.cert_pem();
  }
  server_ = std::make_unique<httplib::Server>();
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
    Record(req);
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server_->Get(kImdsAttestedPath, [this](const httplib::Request& req, httplib::Response& res) {
    HandleDocument(req, res);
  });
  // bind_* also listen(), so clients can connect before the serving thread runs.
  int port = options_.port == 0 ? server_->bind_to_any_port(options_.host)
             : server_->bind_to_port(options_.host, options_.port) ? options_.port
                                                                   : -1;
  if (port <= 0) {
    throw std::runtime_error("ImdsStandin could not bind " +
                             JoinHost(options_.host, options_.port));
  }
  port_ = static_cast<uint16_t>(port);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib's stop() is a no-op until the serving loop has started; a stand-in destroyed
  // right away would otherwise leave that loop (and the join) running forever.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_->is_running() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ImdsStandin::~ImdsStandin() { Stop(); }

void ImdsStandin::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();  // ends delays in progress
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string ImdsStandin::base_url() const { return "http://" + JoinHost(options_.host, port_); }

std::string ImdsStandin::document_url() const {
  return base_url() + kImdsAttestedPath + "?api-version=" + kImdsApiVersion;
}

void ImdsStandin::Record(const httplib::Request& req) {
  ImdsRequest r;
  r.method = req.method;
  r.target = req.target;
  r.path = req.path;
  r.params.insert(req.params.begin(), req.params.end());
  r.headers.assign(req.headers.begin(), req.headers.end());
  r.remote_addr = req.remote_addr;
  requests_.Add(std::move(r));
}

void ImdsStandin::SleepUnlessStopping(std::chrono::milliseconds delay) const {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, delay, [this] { return stopping_; });
}

// The checks IMDS makes before looking at the request any further.
bool ImdsStandin::ValidateRequest(const httplib::Request& req, httplib::Response& res) {
  if (!EqualsIgnoreCase(req.get_header_value("Metadata"), "true")) {
    res.status = 400;
    res.set_content(kImdsMissingHeaderBody, kJsonType);
    return false;
  }
  if (req.has_header("X-Forwarded-For")) {  // IMDS refuses proxied requests
    res.status = 400;
    res.set_content(kForwardedBody, kJsonType);
    return false;
  }
  if (req.get_param_value("api-version").empty()) {
    res.status = 400;
    res.set_content(kMissingApiVersionBody, kJsonType);
    return false;
  }
  return true;
}

// Counted failures and redirects; true when one of them answered the request.
bool ImdsStandin::ApplyFaults(httplib::Response& res) {
  std::lock_guard<std::mutex> lock(mu_);
  if (behavior_.failures_before_success > 0) {
    --behavior_.failures_before_success;
    res.status = behavior_.failure_status;
    res.set_content(R"({"error":"stand-in failure"})", kJsonType);
    return true;
  }
  if (behavior_.redirect_location) {
    res.set_redirect(*behavior_.redirect_location, behavior_.redirect_status);
    return true;
  }
  return false;
}

void ImdsStandin::HandleDocument(const httplib::Request& req, httplib::Response& res) {
  SleepUnlessStopping(TakeDelay());
  if (!ValidateRequest(req, res) || ApplyFaults(res)) return;
  ImdsBehavior b = behavior();
  res.status = b.status.value_or(200);
  if (b.body) {
    res.set_content(*b.body, kJsonType);
    return;
  }
  std::string body = SignedDocumentBody(req.get_param_value("nonce"));
  if (b.body_size) body = FitToSize(std::move(body), *b.body_size);
  res.set_content(body, kJsonType);
}

std::string ImdsStandin::SignedDocumentBody(const std::string& nonce) {
  AttestedDocumentFields fields;
  fields.vm_id = options_.vm_id;
  fields.subscription_id = options_.subscription_id;
  fields.sku = options_.sku;
  fields.nonce = nonce;
  std::string signature = SignAttestedContent(AttestedDocumentJson(fields), signer_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    served_signatures_.push_back(signature);
  }
  return nlohmann::json{{"encoding", "pkcs7"}, {"signature", signature}}.dump();
}

std::chrono::milliseconds ImdsStandin::TakeDelay() {
  std::lock_guard<std::mutex> lock(mu_);
  if (behavior_.delayed_requests == 0) return std::chrono::milliseconds(0);
  if (behavior_.delayed_requests > 0) --behavior_.delayed_requests;
  return behavior_.delay;
}

ImdsBehavior ImdsStandin::behavior() const {
  std::lock_guard<std::mutex> lock(mu_);
  return behavior_;
}

void ImdsStandin::SetBehavior(ImdsBehavior behavior) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_ = std::move(behavior);
}

void ImdsStandin::SetDelay(std::chrono::milliseconds delay, int requests) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.delay = delay;
  behavior_.delayed_requests = requests;
}

void ImdsStandin::SetStatus(std::optional<int> status) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.status = status;
}

void ImdsStandin::SetBody(std::optional<std::string> body) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.body = std::move(body);
}

void ImdsStandin::SetBodySize(std::optional<size_t> size) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.body_size = size;
}

void ImdsStandin::FailFirst(int failures, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.failures_before_success = failures;
  behavior_.failure_status = status;
}

void ImdsStandin::SetRedirect(std::optional<std::string> location, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_.redirect_location = std::move(location);
  behavior_.redirect_status = status;
}

void ImdsStandin::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  behavior_ = ImdsBehavior{};
  requests_.Clear();
  served_signatures_.clear();
}

std::vector<ImdsRequest> ImdsStandin::requests() const { return requests_.All(); }

size_t ImdsStandin::request_count() const { return requests_.size(); }

bool ImdsStandin::WaitForRequests(size_t n, std::chrono::milliseconds timeout) const {
  return requests_.WaitFor(n, timeout);
}

std::vector<std::string> ImdsStandin::served_signatures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return served_signatures_;
}

AttestedContent VerifyAttestedSignature(std::string_view signature_base64,
                                        std::string_view trust_pem) {
  service::SignedDocument doc =
      service::VerifySignedDocument(signature_base64, trust_pem, /*signer_name=*/"");
  AttestedContent out;
  out.ok = doc.ok();
  out.error = doc.error.message();
  out.json = std::move(doc.content);
  out.signer_subject = std::move(doc.signer_subject);
  return out;
}

}  // namespace hotfix::testsupport
