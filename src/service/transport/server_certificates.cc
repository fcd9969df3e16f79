#include "service/transport/server_certificates.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>

#include "common/text.h"

namespace hotfix::service {
namespace {

// RFC 1035's longest name in text, without the trailing dot.
constexpr size_t kMaxDnsNameChars = 253;

constexpr char kIpv4MappedPrefix[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '\xff', '\xff'};

// ::ffff:a.b.c.d as a.b.c.d: a dual-stack listener sees IPv4 clients so, and a certificate
// names the IPv4 address.
std::string_view UnmapIpv4(std::string_view address) {
  if (address.size() == 16 && address.substr(0, 12) == std::string_view(kIpv4MappedPrefix, 12)) {
    return address.substr(12);
  }
  return address;
}

// Lower-cases `name` into `out` (kMaxDnsNameChars + 2 bytes), dropping one trailing dot; the
// name's view in `out`, empty when it is empty or too long.
std::string_view NormalizeInto(std::string_view name, char* out) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > kMaxDnsNameChars) return {};
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    out[i] = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return {out, name.size()};
}

// Every label non-empty: no leading or doubled dot.
bool LabelsNonEmpty(std::string_view name) {
  return !name.empty() && name.front() != '.' && name.find("..") == std::string_view::npos;
}

// The address bytes of an IP literal ("10.0.0.1", "::1"), empty if `text` is not one.
std::string IpLiteralBytes(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return {};
  char buffer[INET6_ADDRSTRLEN];
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  std::array<unsigned char, 16> bytes{};
  if (inet_pton(AF_INET, buffer, bytes.data()) == 1) {
    return std::string(reinterpret_cast<const char*>(bytes.data()), 4);
  }
  if (inet_pton(AF_INET6, buffer, bytes.data()) == 1) {
    return std::string(
        UnmapIpv4(std::string_view(reinterpret_cast<const char*>(bytes.data()), 16)));
  }
  return {};
}

// The leaf's subjectAltNames into the pair: DNS names sorted and unique (ForAddress compares
// them), IP addresses, and the names no server name can select.
void ReadSubjectAltNames(X509* leaf, ServingPair* pair) {
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(leaf, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return;
  char buffer[kMaxDnsNameChars + 2];
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      const std::string_view bytes(reinterpret_cast<const char*>(ASN1_STRING_get0_data(ip)),
                                   static_cast<size_t>(ASN1_STRING_length(ip)));
      if (bytes.size() == 4 || bytes.size() == 16)
        pair->ip_addresses.emplace_back(UnmapIpv4(bytes));
      continue;
    }
    if (name->type != GEN_DNS) continue;
    const std::string_view raw(
        reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->d.dNSName)),
        static_cast<size_t>(ASN1_STRING_length(name->d.dNSName)));
    const std::string_view dns = NormalizeInto(raw, buffer);
    const size_t star = dns.find('*');
    bool usable = LabelsNonEmpty(dns) && raw.find('\0') == std::string_view::npos;
    if (usable && star != std::string_view::npos) {
      // "*." then at least two labels, no other star (RFC 6125 6.4.3, as Go and OpenSSL's
      // X509_check_host match wildcards; a wildcard over a top-level domain is refused).
      const std::string_view rest = dns.substr(std::min<size_t>(2, dns.size()));
      usable = dns.size() > 2 && dns.substr(0, 2) == "*." && LabelsNonEmpty(rest) &&
               rest.find('*') == std::string_view::npos && rest.find('.') != std::string_view::npos;
    }
    if (usable) {
      pair->dns_names.emplace_back(dns);
    } else {
      pair->unusable_names.push_back(EscapeForMessage(raw, kMaxDnsNameChars + 2));
    }
  }
  GENERAL_NAMES_free(names);
  std::sort(pair->dns_names.begin(), pair->dns_names.end());
  pair->dns_names.erase(std::unique(pair->dns_names.begin(), pair->dns_names.end()),
                        pair->dns_names.end());
}

// Which of two pairs carrying one name serves it: the one expiring last, then (for a stable
// answer across reloads and replicas) the lesser name.
bool Prefer(const ServingPair* candidate, const ServingPair* current) {
  if (candidate->not_after != current->not_after) {
    return candidate->not_after > current->not_after;
  }
  return candidate->name < current->name;
}

}  // namespace

std::string NormalizeServerName(std::string_view name) {
  char buffer[kMaxDnsNameChars + 2];
  return std::string(NormalizeInto(name, buffer));
}

StatusOr<std::shared_ptr<const ServingPair>> ParseServingPair(std::string name,
                                                              std::string_view cert_pem,
                                                              std::string_view key_pem,
                                                              int64_t now) {
  auto pair = std::make_shared<ServingPair>();
  pair->name = std::move(name);
  StatusOr<std::vector<ossl::X509Ptr>> parsed = ossl::ParsePemCertificates(cert_pem);
  if (!parsed.ok()) return parsed.status().Annotate("the certificate");
  std::vector<ossl::X509Ptr>& certs = *parsed;
  ossl::BioPtr key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  pair->key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!pair->key) {
    return Status::InvalidArgument("no usable PEM private key: " +
                                   ossl::DrainErrorsOr("no PEM data"));
  }
  if (X509_check_private_key(certs.front().get(), pair->key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("the key does not match the certificate");
  }
  pair->leaf = std::move(certs.front());
  pair->chain.reset(sk_X509_new_null());
  for (size_t i = 1; i < certs.size(); ++i) {
    if (pair->chain == nullptr || sk_X509_push(pair->chain.get(), certs[i].get()) == 0) {
      return Status::Internal("sk_X509_push: " + ossl::DrainErrorsOr("out of memory"));
    }
    certs[i].release();  // the stack owns it now
  }

  struct tm expiry {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(pair->leaf.get()), &expiry) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("the certificate's notAfter does not parse");
  }
  pair->not_after = static_cast<int64_t>(timegm(&expiry));
  char subject[512];
  X509_NAME_oneline(X509_get_subject_name(pair->leaf.get()), subject, sizeof subject);
  pair->subject = subject;
  if (pair->not_after < now) {
    return Status::InvalidArgument("the certificate " + pair->subject + " expired at Unix time " +
                                   std::to_string(pair->not_after));
  }
  ReadSubjectAltNames(pair->leaf.get(), pair.get());
  if (const size_t names = pair->dns_names.size() + pair->ip_addresses.size();
      names > kMaxNamesPerPair) {
    return Status::InvalidArgument("the certificate " + pair->subject + " carries " +
                                   std::to_string(names) + " subjectAltNames, more than " +
                                   std::to_string(kMaxNamesPerPair));
  }
  if (pair->dns_names.empty() && pair->ip_addresses.empty()) {
    std::string unusable;
    for (const std::string& n : pair->unusable_names) unusable += (unusable.empty() ? "" : ",") + n;
    return Status::InvalidArgument(
        "the certificate " + pair->subject +
        " has no DNS or IP subjectAltName a server name can select it by" +
        (unusable.empty() ? std::string() : " (unusable: " + unusable + ")"));
  }
  return std::shared_ptr<const ServingPair>(std::move(pair));
}

CertificateIndex::CertificateIndex(std::vector<std::shared_ptr<const ServingPair>> pairs)
    : pairs_(std::move(pairs)) {
  for (const auto& pair : pairs_) {
    for (const std::string& dns : pair->dns_names) {
      if (dns.size() > 2 && dns[0] == '*') {
        Add(&wildcard_, dns.substr(2), pair.get());
      } else {
        Add(&exact_, dns, pair.get());
      }
    }
    for (const std::string& address : pair->ip_addresses) {
      auto [it, added] = by_address_.try_emplace(address, pair.get());
      if (added || it->second == nullptr) continue;
      // One cluster's pairs side by side (a rotation) share their names too; pairs of two
      // clusters that share an address serve neither by it.
      it->second = it->second->dns_names == pair->dns_names
                       ? (Prefer(pair.get(), it->second) ? pair.get() : it->second)
                       : nullptr;
    }
  }
}

void CertificateIndex::Add(Map* map, std::string key, const ServingPair* pair) {
  auto [it, added] = map->try_emplace(std::move(key), pair);
  if (added || it->second == pair) return;
  ++shared_names_;
  if (Prefer(pair, it->second)) it->second = pair;
}

const ServingPair* CertificateIndex::ForServerName(std::string_view server_name) const {
  char buffer[kMaxDnsNameChars + 2];
  const std::string_view name = NormalizeInto(server_name, buffer);
  // A star is a certificate's wildcard, never a name a client dialed.
  if (name.empty() || name.find('*') != std::string_view::npos) return nullptr;
  if (auto it = exact_.find(name); it != exact_.end()) return it->second;
  const size_t dot = name.find('.');
  if (dot != 0 && dot != std::string_view::npos) {
    if (auto it = wildcard_.find(name.substr(dot + 1)); it != wildcard_.end()) return it->second;
  }
  // Not a DNS name a client should send (RFC 6066 3), but some send the IP they dialed.
  if (std::string address = IpLiteralBytes(name); !address.empty()) return ForAddress(address);
  return nullptr;
}

const ServingPair* CertificateIndex::ForAddress(std::string_view address) const {
  auto it = by_address_.find(UnmapIpv4(address));
  return it == by_address_.end() ? nullptr : it->second;
}

}  // namespace hotfix::service
