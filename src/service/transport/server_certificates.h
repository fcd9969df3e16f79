// The serving certificates of a service that answers many clusters, and which one a
// ClientHello gets. Since AgentBaker #9351 a node verifies the service's certificate against
// its cluster CA with the apiserver host it dialed as the name (SNI = that host; for an IP
// literal, no SNI and the IP SAN is checked): so each cluster needs a certificate for its own
// apiserver FQDN, issued by its own CA, and the service picks it by the server name the node
// sent (docs/SERVICE.md, "TLS").
//
// I/O-free: ParseServingPair checks one pair's PEM, CertificateIndex is built once per reload
// from the pairs and then only read, by any number of threads, once per handshake.
//
//   auto pair = ParseServingPair("cluster-a", cert_pem, key_pem, time(nullptr));
//   CertificateIndex index({*pair, ...});
//   const ServingPair* p = index.ForServerName("myaks-dns-1.hcp.eastus.azmk8s.io");
//   const ServingPair* q = index.ForAddress(std::string("\x0a\x00\x00\x01", 4));  // 10.0.0.1
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/openssl.h"
#include "common/status.h"

namespace hotfix::service {

// A chain's certificates, each freed with the stack.
struct X509StackFree {
  void operator()(STACK_OF(X509) * stack) const { sk_X509_pop_free(stack, X509_free); }
};
using X509StackPtr = std::unique_ptr<STACK_OF(X509), X509StackFree>;

// One certificate and its key, as a ClientHello may be given them.
struct ServingPair {
  std::string name;  // its folder's name under --tls-cert-dir: for logs and metrics
  ossl::X509Ptr leaf;
  ossl::PkeyPtr key;
  X509StackPtr chain;  // the certificates after the leaf in its file, in order (maybe empty)
  // The leaf's DNS subjectAltNames a server name can select it by, lower-case without a
  // trailing dot: exact names, and wildcards as "*.rest" (the whole first label a star).
  std::vector<std::string> dns_names;
  // Its IP subjectAltNames, 4 or 16 bytes each (an IPv4-mapped IPv6 one as its IPv4 bytes).
  std::vector<std::string> ip_addresses;
  // subjectAltNames no server name can select (a partial wildcard such as "f*.example.com", a
  // star not alone in the first label, a wildcard over fewer than two labels): listed for the
  // log, never matched. A client's verifier would refuse most of them anyway.
  std::vector<std::string> unusable_names;
  std::string subject;    // the leaf's subject, one line
  int64_t not_after = 0;  // the leaf's notAfter, Unix seconds
};

// subjectAltNames (DNS and IP) one pair may carry: a cluster's certificate carries a handful,
// and the index holds every one of every pair (so 1,024 pairs hold at most 256 Ki keys).
inline constexpr size_t kMaxNamesPerPair = 256;

// Checks and parses one pair: a PEM chain (leaf first) and its key, as --tls-cert/--tls-key
// take them. Refused: no certificate, no usable key, a key not matching the leaf, a leaf that
// expired before `now` (Unix seconds), a leaf with no DNS or IP subjectAltName a ClientHello
// can select it by (the common name is never used, as no client since Go 1.15 uses it), and
// one with more than kMaxNamesPerPair.
StatusOr<std::shared_ptr<const ServingPair>> ParseServingPair(std::string name,
                                                              std::string_view cert_pem,
                                                              std::string_view key_pem,
                                                              int64_t now);

// "myaks.hcp.eastus.azmk8s.io" from "MyAKS.hcp.eastus.azmk8s.io." (ASCII lower-case, one
// trailing dot dropped), as names are compared (RFC 6125 6.4.1; DNS names are ASCII: an IDN is
// its xn-- form). Empty when the name is empty or longer than a DNS name can be (253).
std::string NormalizeServerName(std::string_view name);

// Which pair a ClientHello gets. Built once per reload; read-only after, so any thread may
// call it without a lock.
class CertificateIndex {
 public:
  explicit CertificateIndex(std::vector<std::shared_ptr<const ServingPair>> pairs);

  // The pair for the server name (SNI) a client sent: the pair carrying exactly that name
  // (case-insensitive, a trailing dot ignored), else one carrying the wildcard "*." + the name
  // less its first label. A wildcard stands for one whole label: "*.hcp.eastus.azmk8s.io"
  // matches "a.hcp.eastus.azmk8s.io", not "hcp.eastus.azmk8s.io" nor
  // "a.b.hcp.eastus.azmk8s.io". A name carried by several pairs (a rotation: old and new side
  // by side) selects the one that expires last. An IP literal sent as a name is looked up as
  // ForAddress does. nullptr: no pair is for that name, and none may be served in its place.
  const ServingPair* ForServerName(std::string_view server_name) const;
  // The pair for a client that sent no server name, by the address it dialed (4 or 16
  // bytes): the pair carrying that IP SAN, only if every pair that carries it carries the same
  // DNS names (one cluster's pairs; then the one expiring last). Two clusters may well share
  // a private apiserver address, and neither may be shown the other's certificate.
  const ServingPair* ForAddress(std::string_view address) const;

  const std::vector<std::shared_ptr<const ServingPair>>& pairs() const { return pairs_; }
  // Names (exact or wildcard) carried by more than one pair.
  size_t shared_names() const { return shared_names_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using Map = std::unordered_map<std::string, const ServingPair*, Hash, std::equal_to<>>;
  void Add(Map* map, std::string key, const ServingPair* pair);

  std::vector<std::shared_ptr<const ServingPair>> pairs_;
  Map exact_;
  Map wildcard_;    // by what follows "*.": "hcp.eastus.azmk8s.io"
  Map by_address_;  // nullptr: carried by pairs of different names, so by none
  size_t shared_names_ = 0;
};

}  // namespace hotfix::service
