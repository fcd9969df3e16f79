#include "service/identity/signer_cache.h"

#include <openssl/err.h>

#include <climits>

namespace hotfix::service {
namespace {

std::string_view Between(const unsigned char* from, const unsigned char* to) {
  return {reinterpret_cast<const char*>(from), static_cast<size_t>(to - from)};
}

// One TLV as ASN1_get_object reads it: [start, content) is the header, [content, end) the contents.
struct Tlv {
  const unsigned char* start;
  const unsigned char* content;
  const unsigned char* end;

  std::string_view bytes() const { return Between(start, end); }
};

// The TLV at `p`, which must lie within [p, limit), have a definite length and be of class
// `want_class`, tag `want_tag` and form `want_constructed`. ASN1_get_object does the decoding
// (and the bounds check: the contents must fit in `limit - p`); only its result bits are read
// here: 0x80 an error, 0x01 an indefinite length.
std::optional<Tlv> ReadTlv(const unsigned char* p, const unsigned char* limit, int want_class,
                           int want_tag, bool want_constructed) {
  if (p >= limit) return std::nullopt;
  const unsigned char* content = p;
  long length = 0;
  int tag = 0;
  int xclass = 0;
  int ret = ASN1_get_object(&content, &length, &tag, &xclass, static_cast<long>(limit - p));
  if ((ret & 0x80) != 0) {
    ERR_clear_error();  // a layout we do not take: the full check will say what is wrong
    return std::nullopt;
  }
  if ((ret & 0x01) != 0) return std::nullopt;  // indefinite length: BER, never DER
  const bool constructed = (ret & V_ASN1_CONSTRUCTED) != 0;
  if (xclass != want_class || tag != want_tag || constructed != want_constructed) {
    return std::nullopt;
  }
  return Tlv{p, content, content + length};
}

// ContentInfo { contentType, [0] { SignedData { before, [0] { certificate }, after } } } in
// DER, the certificates element left out when `certificate` is empty. The headers are
// written by ASN1_put_object, which always uses DER's shortest length form (ASN1_object_size
// sizes them the same way). nullopt if a length does not fit an int (never for a token
// under the authenticator's size cap).
std::optional<std::string> Assemble(std::string_view content_type, std::string_view before,
                                    std::string_view certificate, std::string_view after) {
  constexpr size_t kMax = INT_MAX / 4;
  if (content_type.size() + before.size() + certificate.size() + after.size() > kMax) {
    return std::nullopt;
  }
  const int certs =
      certificate.empty() ? 0 : ASN1_object_size(1, static_cast<int>(certificate.size()), 0);
  const int body = static_cast<int>(before.size() + after.size()) + certs;
  const int signed_data = ASN1_object_size(1, body, V_ASN1_SEQUENCE);
  const int explicit0 = ASN1_object_size(1, signed_data, 0);
  const int outer_body = static_cast<int>(content_type.size()) + explicit0;
  const int total = ASN1_object_size(1, outer_body, V_ASN1_SEQUENCE);
  if (certs < 0 || signed_data < 0 || explicit0 < 0 || total < 0) return std::nullopt;

  std::string out(static_cast<size_t>(total), '\0');
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  auto append = [&p](std::string_view bytes) {
    std::memcpy(p, bytes.data(), bytes.size());
    p += bytes.size();
  };
  ASN1_put_object(&p, 1, outer_body, V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL);
  append(content_type);
  ASN1_put_object(&p, 1, signed_data, 0, V_ASN1_CONTEXT_SPECIFIC);
  ASN1_put_object(&p, 1, body, V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL);
  append(before);
  if (!certificate.empty()) {
    ASN1_put_object(&p, 1, static_cast<int>(certificate.size()), 0, V_ASN1_CONTEXT_SPECIFIC);
    append(certificate);
  }
  append(after);
  if (p != reinterpret_cast<unsigned char*>(out.data()) + out.size()) return std::nullopt;
  return out;
}

}  // namespace

std::optional<SplitSignedData> SplitOffCertificate(std::string_view der) {
  const auto* begin = reinterpret_cast<const unsigned char*>(der.data());
  const auto* end = begin + der.size();

  std::optional<Tlv> outer = ReadTlv(begin, end, V_ASN1_UNIVERSAL, V_ASN1_SEQUENCE, true);
  if (!outer || outer->end != end) return std::nullopt;
  std::optional<Tlv> content_type =
      ReadTlv(outer->content, outer->end, V_ASN1_UNIVERSAL, V_ASN1_OBJECT, false);
  if (!content_type) return std::nullopt;
  std::optional<Tlv> explicit0 =
      ReadTlv(content_type->end, outer->end, V_ASN1_CONTEXT_SPECIFIC, 0, true);
  if (!explicit0 || explicit0->end != outer->end) return std::nullopt;
  std::optional<Tlv> signed_data =
      ReadTlv(explicit0->content, explicit0->end, V_ASN1_UNIVERSAL, V_ASN1_SEQUENCE, true);
  if (!signed_data || signed_data->end != explicit0->end) return std::nullopt;
  const unsigned char* limit = signed_data->end;
  std::optional<Tlv> version =
      ReadTlv(signed_data->content, limit, V_ASN1_UNIVERSAL, V_ASN1_INTEGER, false);
  if (!version) return std::nullopt;
  std::optional<Tlv> digests = ReadTlv(version->end, limit, V_ASN1_UNIVERSAL, V_ASN1_SET, true);
  if (!digests) return std::nullopt;
  std::optional<Tlv> inner = ReadTlv(digests->end, limit, V_ASN1_UNIVERSAL, V_ASN1_SEQUENCE, true);
  if (!inner) return std::nullopt;
  // certificates [0] IMPLICIT SET OF Certificate, holding exactly one.
  std::optional<Tlv> certs = ReadTlv(inner->end, limit, V_ASN1_CONTEXT_SPECIFIC, 0, true);
  if (!certs) return std::nullopt;
  std::optional<Tlv> cert =
      ReadTlv(certs->content, certs->end, V_ASN1_UNIVERSAL, V_ASN1_SEQUENCE, true);
  if (!cert || cert->end != certs->end) return std::nullopt;
  // Then signerInfos and nothing else: a crls [1] would be an element of its own here.
  std::optional<Tlv> signer_infos = ReadTlv(certs->end, limit, V_ASN1_UNIVERSAL, V_ASN1_SET, true);
  if (!signer_infos || signer_infos->end != limit) return std::nullopt;

  const std::string_view before = Between(signed_data->content, certs->start);
  const std::string_view after = Between(certs->end, limit);
  std::optional<std::string> stripped = Assemble(content_type->bytes(), before, "", after);
  std::optional<std::string> whole = Assemble(content_type->bytes(), before, cert->bytes(), after);
  if (!stripped || !whole || *whole != der) return std::nullopt;
  return SplitSignedData{cert->bytes(), std::move(*stripped)};
}

bool CachedSigner::ChainValidNow() const {
  // X509_cmp_time: -1 when the time is at or before now, 1 after it, 0 on error.
  return X509_cmp_time(chain_not_before.get(), nullptr) == -1 &&
         X509_cmp_time(chain_not_after.get(), nullptr) == 1;
}

Status SetChainWindow(STACK_OF(X509) * chain, CachedSigner* signer) {
  const ASN1_TIME* latest_not_before = nullptr;
  const ASN1_TIME* earliest_not_after = nullptr;
  for (int i = 0; i < sk_X509_num(chain); ++i) {
    X509* cert = sk_X509_value(chain, i);
    const ASN1_TIME* not_before = X509_get0_notBefore(cert);
    const ASN1_TIME* not_after = X509_get0_notAfter(cert);
    if (latest_not_before == nullptr) {
      latest_not_before = not_before;
      earliest_not_after = not_after;
      continue;
    }
    int later = ASN1_TIME_compare(not_before, latest_not_before);
    int earlier = ASN1_TIME_compare(not_after, earliest_not_after);
    if (later == -2 || earlier == -2) {  // a time that does not parse
      ERR_clear_error();
      return Status::InvalidArgument("a certificate time in the chain does not parse");
    }
    if (later > 0) latest_not_before = not_before;
    if (earlier < 0) earliest_not_after = not_after;
  }
  if (latest_not_before == nullptr) return Status::InvalidArgument("an empty chain");
  signer->chain_not_before.reset(ASN1_STRING_dup(latest_not_before));
  signer->chain_not_after.reset(ASN1_STRING_dup(earliest_not_after));
  if (!signer->chain_not_before || !signer->chain_not_after) {
    ERR_clear_error();
    return Status::Internal("copying the chain's validity times failed");
  }
  return Status::Ok();
}

std::shared_ptr<const CachedSigner> SignerCache::Find(const ossl::Sha256Digest& digest) {
  std::lock_guard lock(mu_);
  auto it = index_.find(digest);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void SignerCache::Insert(const ossl::Sha256Digest& digest,
                         std::shared_ptr<const CachedSigner> signer) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mu_);
  if (auto it = index_.find(digest); it != index_.end()) {
    it->second->second = std::move(signer);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  while (index_.size() >= capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(digest, std::move(signer));
  index_.emplace(digest, lru_.begin());
}

void SignerCache::Erase(const ossl::Sha256Digest& digest, const CachedSigner* signer) {
  std::lock_guard lock(mu_);
  auto it = index_.find(digest);
  if (it == index_.end() || it->second->second.get() != signer) return;
  lru_.erase(it->second);
  index_.erase(it);
}

size_t SignerCache::size() const {
  std::lock_guard lock(mu_);
  return index_.size();
}

}  // namespace hotfix::service
