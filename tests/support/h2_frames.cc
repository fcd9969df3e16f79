#include "h2_frames.h"

#include <nghttp2/nghttp2.h>
#include <zlib.h>

#include <algorithm>
#include <stdexcept>

namespace hotfix::testsupport::h2 {
namespace {

void PutUint32(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

}  // namespace

std::string ClientPreface() { return "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"; }

std::string FrameHeader(uint32_t length, uint8_t type, uint8_t flags, uint32_t stream_id) {
  std::string out;
  out.push_back(static_cast<char>(length >> 16));
  out.push_back(static_cast<char>(length >> 8));
  out.push_back(static_cast<char>(length));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  PutUint32(&out, stream_id);
  return out;
}

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload) {
  std::string out = FrameHeader(static_cast<uint32_t>(payload.size()), type, flags, stream_id);
  out.append(payload);
  return out;
}

std::string Settings(const std::vector<std::pair<uint16_t, uint32_t>>& params) {
  std::string payload;
  for (auto [id, value] : params) {
    payload.push_back(static_cast<char>(id >> 8));
    payload.push_back(static_cast<char>(id));
    PutUint32(&payload, value);
  }
  return Frame(kSettings, 0, 0, payload);
}

std::string SettingsAck() { return Frame(kSettings, kAck, 0, ""); }

std::string Headers(uint32_t stream_id, std::string_view block, uint8_t flags) {
  return Frame(kHeaders, flags, stream_id, block);
}

std::string Continuation(uint32_t stream_id, std::string_view block, bool end_headers) {
  return Frame(kContinuation, end_headers ? kEndHeaders : 0, stream_id, block);
}

std::string Data(uint32_t stream_id, std::string_view payload, bool end_stream) {
  return Frame(kData, end_stream ? kEndStream : 0, stream_id, payload);
}

std::string RstStream(uint32_t stream_id, uint32_t error_code) {
  std::string payload;
  PutUint32(&payload, error_code);
  return Frame(kRstStream, 0, stream_id, payload);
}

std::string Ping(uint64_t opaque, bool ack) {
  std::string payload;
  PutUint32(&payload, static_cast<uint32_t>(opaque >> 32));
  PutUint32(&payload, static_cast<uint32_t>(opaque));
  return Frame(kPing, ack ? kAck : 0, 0, payload);
}

std::string WindowUpdate(uint32_t stream_id, uint32_t increment) {
  std::string payload;
  PutUint32(&payload, increment);
  return Frame(kWindowUpdate, 0, stream_id, payload);
}

std::string Goaway(uint32_t last_stream_id, uint32_t error_code, std::string_view debug) {
  std::string payload;
  PutUint32(&payload, last_stream_id);
  PutUint32(&payload, error_code);
  payload.append(debug);
  return Frame(kGoaway, 0, 0, payload);
}

std::string HpackInteger(uint64_t value, int prefix_bits, uint8_t pattern, size_t padding) {
  const uint64_t max_prefix = (uint64_t{1} << prefix_bits) - 1;
  std::string out;
  if (value < max_prefix) {
    if (padding > 0) {
      throw std::invalid_argument("HPACK integer padding needs value >= 2^prefix_bits - 1");
    }
    out.push_back(static_cast<char>(pattern | value));
    return out;
  }
  out.push_back(static_cast<char>(pattern | max_prefix));
  uint64_t rest = value - max_prefix;
  while (rest >= 0x80) {
    out.push_back(static_cast<char>(0x80 | (rest & 0x7f)));
    rest >>= 7;
  }
  if (padding == 0) {
    out.push_back(static_cast<char>(rest));
    return out;
  }
  // The last significant group keeps its continuation bit; zero groups follow, the final one
  // without it.
  out.push_back(static_cast<char>(0x80 | rest));
  out.append(padding - 1, static_cast<char>(0x80));
  out.push_back('\0');
  return out;
}

std::string HpackStringLength(uint64_t length, bool huffman, size_t padding) {
  return HpackInteger(length, 7, huffman ? 0x80 : 0x00, padding);
}

std::string HpackString(std::string_view s) { return HpackStringLength(s.size()).append(s); }

std::string HpackLiteral(std::string_view name, std::string_view value) {
  return std::string(1, '\0') + HpackString(name) + HpackString(value);
}

std::string HpackBlock(const HeaderFields& fields) {
  std::string out;
  for (const auto& [name, value] : fields) out += HpackLiteral(name, value);
  return out;
}

HeaderFields GrpcRequestFields(std::string_view path, std::string_view authority,
                               const HeaderFields& extra) {
  HeaderFields fields = {{":method", "POST"},
                         {":scheme", "https"},
                         {":path", std::string(path)},
                         {":authority", std::string(authority)},
                         {"content-type", "application/grpc"},
                         {"te", "trailers"}};
  fields.insert(fields.end(), extra.begin(), extra.end());
  return fields;
}

std::string GzipOfZeros(uint64_t inflated_size) {
  z_stream z{};
  // windowBits 16 + 15: a gzip wrapper, which is what "gzip" means in grpc-encoding.
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + 15, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  static const std::string kZeros(1 << 20, '\0');
  std::string out;
  char buf[16384];
  uint64_t left = inflated_size;
  int flush = Z_NO_FLUSH;
  while (flush != Z_FINISH) {
    uInt n = static_cast<uInt>(std::min<uint64_t>(left, kZeros.size()));
    left -= n;
    flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(kZeros.data()));
    z.avail_in = n;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return out;
}

std::optional<ReceivedFrame> FrameReader::Next() {
  std::string_view rest = std::string_view(buffer_).substr(offset_);
  if (rest.size() < 9) return std::nullopt;
  auto byte = [&rest](size_t i) { return static_cast<uint8_t>(rest[i]); };
  size_t length = (size_t{byte(0)} << 16) | (size_t{byte(1)} << 8) | byte(2);
  if (rest.size() < 9 + length) return std::nullopt;
  ReceivedFrame frame;
  frame.type = byte(3);
  frame.flags = byte(4);
  frame.stream_id = ReadUint32(rest, 5) & 0x7fffffff;
  frame.payload.assign(rest.substr(9, length));
  offset_ += 9 + length;
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  // Compact now and then rather than on every frame: frames are small, buffers may not be.
  if (offset_ > (1 << 16) && offset_ * 2 > buffer_.size()) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  return frame;
}

std::optional<std::string_view> HeaderBlockFragment(const ReceivedFrame& frame) {
  std::string_view p = frame.payload;
  if (frame.type != kHeaders) return p;
  size_t pad = 0;
  if (frame.flags & kPadded) {
    if (p.empty()) return std::nullopt;
    pad = static_cast<uint8_t>(p[0]);
    p.remove_prefix(1);
  }
  if (frame.flags & kPriorityFlag) {
    if (p.size() < 5) return std::nullopt;
    p.remove_prefix(5);
  }
  if (pad > p.size()) return std::nullopt;
  p.remove_suffix(pad);
  return p;
}

std::vector<std::pair<uint16_t, uint32_t>> SettingsParams(std::string_view payload) {
  std::vector<std::pair<uint16_t, uint32_t>> out;
  for (size_t i = 0; i + 6 <= payload.size(); i += 6) {
    uint16_t id = static_cast<uint16_t>((static_cast<uint8_t>(payload[i]) << 8) |
                                        static_cast<uint8_t>(payload[i + 1]));
    out.emplace_back(id, ReadUint32(payload, i + 2));
  }
  return out;
}

uint32_t ReadUint32(std::string_view bytes, size_t offset) {
  if (offset + 4 > bytes.size()) return 0;
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[offset + i]);
  return v;
}

std::vector<nghttp2_nv> ToNv(const HeaderFields& fields) {
  std::vector<nghttp2_nv> nv;
  for (const auto& [name, value] : fields) {
    nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                  reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                  value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  return nv;
}

struct HpackDecoder::Inflater {
  nghttp2_hd_inflater* hd = nullptr;
  bool failed = false;
};

HpackDecoder::HpackDecoder() : inflater_(std::make_unique<Inflater>()) {
  if (nghttp2_hd_inflate_new(&inflater_->hd) != 0) inflater_->failed = true;
}

HpackDecoder::~HpackDecoder() {
  if (inflater_->hd != nullptr) nghttp2_hd_inflate_del(inflater_->hd);
}

std::optional<HeaderFields> HpackDecoder::Decode(std::string_view block) {
  if (inflater_->failed) return std::nullopt;
  HeaderFields fields;
  auto* in = reinterpret_cast<const uint8_t*>(block.data());
  size_t left = block.size();
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    ssize_t used = nghttp2_hd_inflate_hd2(inflater_->hd, &nv, &flags, in, left, /*in_final=*/1);
    if (used < 0) {
      inflater_->failed = true;
      return std::nullopt;
    }
    in += used;
    left -= static_cast<size_t>(used);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      fields.emplace_back(std::string(reinterpret_cast<char*>(nv.name), nv.namelen),
                          std::string(reinterpret_cast<char*>(nv.value), nv.valuelen));
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater_->hd);
      return fields;
    }
    if ((flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && left == 0) {
      inflater_->failed = true;  // no progress on complete input: a truncated block
      return std::nullopt;
    }
  }
}

}  // namespace hotfix::testsupport::h2
