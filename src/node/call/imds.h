// The node's identity: the signature of the VM's attested document from the Azure Instance
// Metadata Service (AgentBaker: aks-node-controller/checkhotfix.go fetchIMDSAttestedToken and
// common/httpclient.go RetryStringFetch).
#pragma once

#include <atomic>
#include <string>

#include "common/deadline.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/status.h"
#include "wire/byte_stream.h"

namespace hotfix::node {

// Where the attested token comes from. Tests swap in fakes.
class AttestedTokenSource {
 public:
  virtual ~AttestedTokenSource() = default;
  // The raw "signature" string; errors read "imds attested token: …".
  virtual StatusOr<Secret> Fetch(Deadline deadline) = 0;
  // Asks a Fetch() running on another thread to give up soon: its answer is no longer needed.
  virtual void Cancel() {}
};

inline constexpr char kDefaultImdsUrl[] =
    "http://169.254.169.254/metadata/attested/document?api-version=2025-04-07";

// GET <url> with "Metadata: true" (wire::HttpGet), never through a proxy, no redirects
// followed. Two attempts, no sleep between them; each attempt: connect 1 s, whole attempt
// 2 s, body capped at 1 MiB. Any failure (transport, status other than 200, JSON, empty
// signature) is retried once, logged as WARN "fetch attempt failed, retrying".
class ImdsTokenSource : public AttestedTokenSource {
 public:
  ImdsTokenSource(std::string url, Logger& log) : url_(std::move(url)), log_(log) {}
  StatusOr<Secret> Fetch(Deadline deadline) override;
  void Cancel() override { cancelled_ = true; }

  // One attempt, for tests.
  StatusOr<Secret> FetchOnce(Deadline deadline);

 private:
  std::string url_;
  Logger& log_;
  std::atomic<bool> cancelled_{false};
};

// The response half of one attempt, from whatever carries its bytes (the TCP connection in
// FetchOnce; memory in tests and fuzzers): wire::ReadHttpResponse with IMDS's caps (headers
// and chunk framing 16 KiB, body 1 MiB), status 200 required, then ParseAttestedDocument.
// header_deadline bounds the wait for the headers, attempt the whole read; transport errors
// are annotated with `what` ("GET <url>"), as FetchOnce's wire::HttpGet does.
StatusOr<Secret> ReadAttestedResponse(wire::ByteStream& stream, Deadline header_deadline,
                                      Deadline attempt, const std::atomic<bool>& cancelled,
                                      const std::string& what);

// Extracts "signature" from an IMDS response body (Go's lenient decode: key matched
// case-insensitively). Errors: invalid JSON, "imds attested document had empty signature".
StatusOr<Secret> ParseAttestedDocument(std::string_view body);

}  // namespace hotfix::node
