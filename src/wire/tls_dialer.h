// DialTls: resolve, connect (directly or through an HTTP CONNECT proxy) and complete a TLS
// handshake, all under one deadline. Verification cannot be turned off: a name to verify is
// required, and so are trust anchors: the caller's CA and nothing else (the service: the
// cluster CA, never the system roots), or, asked for by name, the system's trust store (a
// public package repository).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/openssl.h"
#include "common/status.h"
#include "wire/byte_stream.h"
#include "wire/http_proxy.h"

namespace hotfix::wire {

using TrustAnchors = std::vector<ossl::X509Ptr>;

// Parses a CA bundle the way DialTls does (common/openssl.h's ParsePemCertificates, Go's
// AppendCertsFromPEM rules). InvalidArgument "cluster CA unavailable; refusing to connect over
// unverified TLS" for an empty bundle, "failed to parse cluster CA PEM" for one without a
// certificate.
StatusOr<TrustAnchors> ParseTrustAnchors(const std::string& ca_pem);

struct TlsDialOptions {
  // TCP destination (a DNS name or an IP literal, no brackets) and port.
  std::string host;
  uint16_t port = 443;
  // Tunnel through this proxy with HTTP CONNECT host:port.
  std::optional<ProxyConfig> proxy;
  // Server Name Indication; not sent when empty or an IP literal.
  std::string sni;
  // Offered in this order, e.g. {"aks-live-patching", "h2"}; none when empty.
  std::vector<std::string> alpn;
  // The handshake fails unless the server selected exactly this protocol. Empty only when
  // nothing is offered (HTTP/1.1 to a repository).
  std::string required_alpn = "h2";
  // The name the server certificate must carry: a DNS name in a DNS SAN (no partial
  // wildcards, CN never used), or an IP literal in an IP SAN. Required: there is no way to
  // dial without a name check.
  std::string verify_name;
  // PEM trust anchors; every CERTIFICATE block is trusted, nothing else. Required unless
  // trust_anchors or system_trust_store is set.
  std::string ca_pem;
  // Trust what the system trusts (OpenSSL's default verify paths, which SSL_CERT_FILE and
  // SSL_CERT_DIR may point elsewhere, as they do for Go) instead of ca_pem: for public
  // package repositories, as the reference's Go HTTP client does. Never for the service.
  bool system_trust_store = false;
  // The same anchors already parsed by ParseTrustAnchors, for a caller that must know the CA
  // is usable before it starts other work (check-hotfix, before it asks IMDS): used instead
  // of ca_pem when set, so the bundle is parsed once.
  std::shared_ptr<const TrustAnchors> trust_anchors;
  // When set and true, the dial gives up before its next step (kUnavailable "dial
  // cancelled"): its result is no longer needed.
  const std::atomic<bool>* cancelled = nullptr;
};

class TlsStream : public ByteStream {
 public:
  // The ALPN protocol the server selected.
  virtual const std::string& selected_alpn() const = 0;
  // "TLSv1.3" etc.
  virtual std::string protocol_version() const = 0;
};

// Fails with a message naming the step: "resolving <host>", "connecting to <addr>",
// "proxy CONNECT", "TLS handshake", "server certificate verification failed: <reason>",
// "server selected ALPN <x>, need h2". Codes: kDeadlineExceeded when the deadline ran out,
// kPermissionDenied for certificate verification, kInvalidArgument for unusable options
// (no CA, CA without certificates), kUnavailable otherwise.
StatusOr<std::unique_ptr<TlsStream>> DialTls(const TlsDialOptions& options, Deadline deadline);

}  // namespace hotfix::wire
