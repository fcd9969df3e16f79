// HTTP/2 frames and HPACK blocks built byte by byte, for tests and seed generators that must
// send what no HTTP/2 library would: lying lengths, header blocks that never end, integers
// padded with continuation bytes, window increments that overflow. Nothing here does I/O or
// checks validity; each function writes exactly the fields it is given (RFC 9113, RFC 7541).
//
//   std::string block =
//       h2::HpackBlock(h2::GrpcRequestFields(h2::kGetComponentConfigPath, kApiserverFqdn));
//   std::string bytes = h2::ClientPreface() + h2::Settings() +
//                       h2::Headers(1, block, h2::kEndHeaders) + h2::RstStream(1, h2::kCancel);
//
// Reading the peer's side: FrameReader splits bytes into frames, HpackDecoder (nghttp2's
// inflater: decoding a well-behaved server's answers is not the part under test) turns header
// blocks into fields. ToNv hands fields to an nghttp2 session a test drives itself.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hotfix::testsupport::h2 {

using HeaderFields = std::vector<std::pair<std::string, std::string>>;

// ---- Frames ----------------------------------------------------------------------------

enum FrameType : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};

// Flag bits; the same bit means different things per frame type.
inline constexpr uint8_t kEndStream = 0x1;      // DATA, HEADERS
inline constexpr uint8_t kAck = 0x1;            // SETTINGS, PING
inline constexpr uint8_t kEndHeaders = 0x4;     // HEADERS, CONTINUATION
inline constexpr uint8_t kPadded = 0x8;         // DATA, HEADERS
inline constexpr uint8_t kPriorityFlag = 0x20;  // HEADERS

// Error codes (RST_STREAM, GOAWAY).
inline constexpr uint32_t kNoError = 0x0;
inline constexpr uint32_t kProtocolError = 0x1;
inline constexpr uint32_t kFlowControlError = 0x3;
inline constexpr uint32_t kCancel = 0x8;
inline constexpr uint32_t kCompressionError = 0x9;
inline constexpr uint32_t kEnhanceYourCalm = 0xb;

// SETTINGS parameters.
inline constexpr uint16_t kHeaderTableSize = 0x1;
inline constexpr uint16_t kEnablePush = 0x2;
inline constexpr uint16_t kMaxConcurrentStreams = 0x3;
inline constexpr uint16_t kInitialWindowSize = 0x4;
inline constexpr uint16_t kMaxFrameSize = 0x5;
inline constexpr uint16_t kMaxHeaderListSize = 0x6;

// What every peer must accept (SETTINGS_MAX_FRAME_SIZE's initial value) and the initial
// flow-control windows.
inline constexpr size_t kDefaultMaxFrameSize = 16384;
inline constexpr int64_t kDefaultWindow = 65535;

// "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
std::string ClientPreface();

// The 9-byte header. `length` is written as given (24 bits), so it may lie about the payload;
// the reserved bit of `stream_id` is written too.
std::string FrameHeader(uint32_t length, uint8_t type, uint8_t flags, uint32_t stream_id);
// Header plus payload, the length being the payload's.
std::string Frame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload);

std::string Settings(const std::vector<std::pair<uint16_t, uint32_t>>& params = {});
std::string SettingsAck();
std::string Headers(uint32_t stream_id, std::string_view block, uint8_t flags);
std::string Continuation(uint32_t stream_id, std::string_view block, bool end_headers);
std::string Data(uint32_t stream_id, std::string_view payload, bool end_stream);
std::string RstStream(uint32_t stream_id, uint32_t error_code);
std::string Ping(uint64_t opaque, bool ack = false);
// `increment` as given: 0, or values whose sum overflows 2^31-1, are the point of some tests.
std::string WindowUpdate(uint32_t stream_id, uint32_t increment);
std::string Goaway(uint32_t last_stream_id, uint32_t error_code, std::string_view debug = "");

// ---- HPACK (no Huffman coding, no dynamic table: every block stands alone) ---------------

// An integer with an N-bit prefix (RFC 7541 5.1); `pattern` holds the representation's bits
// above the prefix (0x80 indexed, 0x40 incremental indexing, 0x20 table size update, 0x00
// without indexing). `padding` > 0 appends that many extra bytes of zero-valued 7-bit groups
// (0x80 ... 0x00): the value is unchanged, the encoding as long as asked. Padding needs a
// saturated prefix, so it throws std::invalid_argument when value < 2^N - 1.
std::string HpackInteger(uint64_t value, int prefix_bits, uint8_t pattern = 0, size_t padding = 0);
// A string literal's length prefix alone (H bit when `huffman`): what a sender streaming a
// huge literal writes before its bytes.
std::string HpackStringLength(uint64_t length, bool huffman = false, size_t padding = 0);
// A raw (non-Huffman) string literal.
std::string HpackString(std::string_view s);
// "Literal Header Field without Indexing, New Name" (0x00 name value).
std::string HpackLiteral(std::string_view name, std::string_view value);
// Every field as HpackLiteral, in order.
std::string HpackBlock(const HeaderFields& fields);

// ---- gRPC over HTTP/2 ------------------------------------------------------------------

inline constexpr char kGetComponentConfigPath[] =
    "/akslivepatching.v1.LivePatchingService/GetComponentConfig";

// The request headers a gRPC client sends for `path` (pseudo-headers first, content-type,
// te), then `extra` (e.g. {"authorization", token}, {"grpc-encoding", "gzip"}).
HeaderFields GrpcRequestFields(std::string_view path, std::string_view authority,
                               const HeaderFields& extra = {});

// gzip (RFC 1952, what grpc-encoding: gzip names) of `inflated_size` zero bytes, made in
// 1 MiB steps so the inflated data never exists here: about 1 KiB per MiB inflated.
std::string GzipOfZeros(uint64_t inflated_size);

// ---- Reading a peer's frames ------------------------------------------------------------

struct ReceivedFrame {
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream_id = 0;  // reserved bit cleared
  std::string payload;
};

// Splits a byte stream into frames; any payload length up to 2^24-1 is accepted.
class FrameReader {
 public:
  void Feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete frame, or nullopt until more bytes are fed.
  std::optional<ReceivedFrame> Next();

 private:
  std::string buffer_;
  size_t offset_ = 0;
};

// The header block fragment of a HEADERS or CONTINUATION frame (padding and priority fields
// removed); nullopt when the padding or priority fields do not fit the payload.
std::optional<std::string_view> HeaderBlockFragment(const ReceivedFrame& frame);

// Big-endian fields of SETTINGS, WINDOW_UPDATE, RST_STREAM and GOAWAY payloads.
std::vector<std::pair<uint16_t, uint32_t>> SettingsParams(std::string_view payload);
uint32_t ReadUint32(std::string_view bytes, size_t offset);

// The fields as nghttp2's name/value pairs, for a test driving an nghttp2 session; they point
// into `fields`, which must outlive them.
std::vector<nghttp2_nv> ToNv(const HeaderFields& fields);

// One connection's HPACK decoding context (its dynamic table): feed it every complete header
// block the peer sends, in order. nullopt once a block fails to decode (the context is then
// unusable, as the connection would be).
class HpackDecoder {
 public:
  HpackDecoder();
  ~HpackDecoder();
  HpackDecoder(const HpackDecoder&) = delete;
  HpackDecoder& operator=(const HpackDecoder&) = delete;

  std::optional<HeaderFields> Decode(std::string_view block);

 private:
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
};

}  // namespace hotfix::testsupport::h2
