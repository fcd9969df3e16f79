// A plain OpenSSL TLS client for tests that must control exactly what the ClientHello
// carries (SNI, ALPN list, versions), e.g. to probe the ALPN routing of a proxy.
//
//   TlsClientOptions o;
//   o.port = proxy.frontend_port();  o.sni = "api.example";  o.ca_pem = ca.cert_pem();
//   o.alpn = {"aks-live-patching", "h2"};  o.verify_name = kApiserverFqdn;
//   TlsClientResult r = TlsHandshake(o);
//   EXPECT_TRUE(r.handshake_ok) << r.error;  EXPECT_EQ(r.selected_alpn, "h2");
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hotfix::testsupport {

struct TlsClientOptions {
  std::string host = "127.0.0.1";  // numeric address
  uint16_t port = 0;
  std::string sni;                // not sent when empty
  std::vector<std::string> alpn;  // offered in this order; no extension when empty
  // Trust only this CA and check verify_name (default: sni) against the SAN; no
  // verification at all when ca_pem is empty.
  std::string ca_pem;
  std::string verify_name;
  // 0 = OpenSSL's defaults. Allowing TLS 1.1 also drops to SECLEVEL 0, as it must.
  int min_version = 0;
  int max_version = 0;
  // TLS 1.2 and below: offer only these suites (OpenSSL's cipher-list syntax); empty: its
  // defaults.
  std::string cipher_list;
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  // Bytes to send after the handshake (e.g. an HTTP/2 preface), before closing.
  std::string send_after_handshake;
};

struct TlsClientResult {
  bool tcp_connected = false;
  bool handshake_ok = false;
  std::string error;
  std::string selected_alpn;
  std::string protocol_version;  // "TLSv1.3"
  std::string peer_common_name;  // of the server's leaf
};

// Sets SIGPIPE to SIG_IGN process-wide (OpenSSL writes with write()).
// Connects, handshakes, optionally sends, and closes. Never throws for network errors: they
// land in result.error so tests can assert on them.
TlsClientResult TlsHandshake(const TlsClientOptions& options);

}  // namespace hotfix::testsupport
