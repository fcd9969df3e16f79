#include "service/transport/h2_session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>

#include "service/transport/connection_memory.h"
#include "wire/grpc_framing.h"

namespace hotfix::service {

using wire::GrpcCode;

namespace {

// What the request's own headers may make us keep per metadata key.
constexpr size_t kMaxValuesPerKey = 4;
// The stream and connection windows we offer: a request is at most max_request_bytes + 5, so
// a window of a little more lets it arrive whole without a WINDOW_UPDATE round trip.
constexpr int32_t kMinWindow = 65535;

std::string_view View(const uint8_t* data, size_t len) {
  return {reinterpret_cast<const char*>(data), len};
}

nghttp2_nv Header(std::string_view name, std::string_view value) {
  // nghttp2 copies names and values on submit; no NO_COPY flags.
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

struct H2Session::Stream {
  int32_t id = 0;
  // The request's headers that matter, each bounded by the header list limit.
  std::string method, path, authority, content_type, grpc_encoding, grpc_timeout;
  std::vector<std::pair<std::string, std::string>> metadata;
  uint64_t header_bytes = 0;
  bool headers_too_large = false;
  // Bytes of kept metadata values and body charged to the process's budget, released when
  // the stream ends; over_budget: the budget had no room, so nothing more is kept.
  uint64_t charged = 0;
  bool over_budget = false;
  std::string body;  // the length-prefixed request, up to max_request_bytes + 5
  bool body_too_large = false;
  bool dispatched = false;            // a reply is decided (sent, delayed, or being sent)
  bool remote_closed = false;         // the peer sent END_STREAM
  bool reset_after_response = false;  // answered early: RST_STREAM(NO_ERROR) once it is out
  SteadyClock::time_point request_deadline = SteadyClock::time_point::max();
  // Once answered, the stream must close by then: a peer that opens streams and never takes the
  // answers (a zero flow-control window) would otherwise hold them, and the connection, for ever.
  SteadyClock::time_point close_deadline = SteadyClock::time_point::max();
  // A delayed reply (test hook) and when it is due.
  std::unique_ptr<GrpcReply> delayed;
  SteadyClock::time_point reply_due = SteadyClock::time_point::max();
  // The framed response message and how much of it nghttp2 has taken.
  std::string response;
  size_t response_sent = 0;
};

// nghttp2's C callbacks, each forwarding to the session. A struct (a friend) rather than
// free functions so they may touch the session's privates.
struct H2Callbacks {
  static H2Session& Self(void* user_data) { return *static_cast<H2Session*>(user_data); }

  static int OnBeginFrame(nghttp2_session*, const nghttp2_frame_hd* hd, void* ud) {
    H2Session& self = Self(ud);
    if (self.failed_) return 0;
    const H2Limits& limits = self.options_.limits;
    bool control = false;
    switch (hd->type) {
      case NGHTTP2_RST_STREAM:
        // Counted here, before nghttp2 counts it with the same numbers, so the event says why.
        if (!self.resets_.Take(self.now_, limits.reset_burst, limits.resets_per_second)) {
          self.Fail(TransportEvent::kResetFlood, NGHTTP2_ENHANCE_YOUR_CALM);
        }
        break;
      case NGHTTP2_SETTINGS:
      case NGHTTP2_PING:
      case NGHTTP2_PRIORITY:
      case NGHTTP2_WINDOW_UPDATE:
        control = true;
        break;
      case NGHTTP2_DATA:
      case NGHTTP2_HEADERS:
      case NGHTTP2_CONTINUATION:
      case NGHTTP2_PUSH_PROMISE:
      case NGHTTP2_GOAWAY:
        // Whether a DATA frame carries any data is known once its padding is (OnFrameRecv);
        // the others open, complete or end something, each under its own limit.
        break;
      default:
        // A type nghttp2 reads and drops (ALTSVC, ORIGIN, PRIORITY_UPDATE, any unknown one):
        // it does nothing for the peer but cost us its reading, as a PING does.
        control = true;
        break;
    }
    if (control) TakeControlFrame(self);
    return 0;
  }

  // One frame that does no work: a burst, then a rate (H2Limits::control_frame_burst).
  static void TakeControlFrame(H2Session& self) {
    const H2Limits& limits = self.options_.limits;
    if (!self.control_.Take(self.now_, limits.control_frame_burst,
                            limits.control_frames_per_second)) {
      self.Fail(TransportEvent::kControlFrameFlood, NGHTTP2_ENHANCE_YOUR_CALM);
    }
  }

  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* ud) {
    H2Session& self = Self(ud);
    if (self.failed_ || frame->hd.type != NGHTTP2_HEADERS ||
        frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      return 0;
    }
    if (self.goaway_sent_ && frame->hd.stream_id > self.goaway_last_stream_id_) {
      // Past our GOAWAY's last stream (it may still be unsent when the peer's next HEADERS
      // arrive in the same read): the client retries it elsewhere, so it must not be run here.
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    auto stream = std::make_unique<H2Session::Stream>();
    stream->id = frame->hd.stream_id;
    stream->request_deadline = self.now_ + self.options_.limits.request_timeout;
    nghttp2_session_set_stream_user_data(session, stream->id, stream.get());
    self.streams_.push_back(std::move(stream));
    ++self.streams_open_;
    self.control_.Add(self.options_.limits.control_frames_per_request,
                      self.options_.limits.control_frame_burst);
    ++self.streams_started_;
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* ud) {
    H2Session& self = Self(ud);
    H2Session::Stream* stream = self.Find(frame->hd.stream_id);
    if (self.failed_ || stream == nullptr || stream->headers_too_large) return 0;
    stream->header_bytes += namelen + valuelen + 32;
    if (stream->header_bytes > self.options_.limits.max_header_list_bytes) {
      // Keep nothing more; answered RESOURCE_EXHAUSTED once the block ends.
      stream->headers_too_large = true;
      stream->metadata.clear();
      stream->metadata.shrink_to_fit();
      return 0;
    }
    std::string_view key = View(name, namelen);
    std::string_view val = View(value, valuelen);
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers: counted, not kept
    if (key == ":method") {
      stream->method = val;
    } else if (key == ":path") {
      stream->path = val;
    } else if (key == ":authority") {
      stream->authority = val;
    } else if (key == "content-type") {
      stream->content_type = val;
    } else if (key == "grpc-encoding") {
      stream->grpc_encoding = val;
    } else if (key == "grpc-timeout") {
      stream->grpc_timeout = val;
    } else if (std::ranges::count(self.options_.kept_metadata, key) != 0) {
      size_t same = std::count_if(stream->metadata.begin(), stream->metadata.end(),
                                  [key](const auto& kv) { return kv.first == key; });
      if (same >= kMaxValuesPerKey || stream->over_budget) return 0;
      if (!self.Charge(stream, val.size())) {
        stream->over_budget = true;
        stream->metadata.clear();
        stream->metadata.shrink_to_fit();
        return 0;
      }
      stream->metadata.emplace_back(key, val);
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                         size_t len, void* ud) {
    H2Session& self = Self(ud);
    H2Session::Stream* stream = self.Find(stream_id);
    if (self.failed_ || stream == nullptr || stream->dispatched) return 0;
    size_t max = size_t{self.options_.limits.max_request_bytes} + wire::kGrpcPrefixSize;
    if (!stream->over_budget && stream->body.size() + len <= max && !self.Charge(stream, len)) {
      stream->over_budget = true;
    }
    if (stream->body.size() + len > max || stream->over_budget) {
      // Answered now: nothing more of this body is kept, and the peer need not finish it.
      stream->body_too_large = true;
      stream->body.clear();
      stream->body.shrink_to_fit();
      self.Dispatch(stream);
      return 0;
    }
    stream->body.append(View(data, len));
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    H2Session& self = Self(ud);
    if (self.failed_) return 0;
    if (frame->hd.type == NGHTTP2_GOAWAY) self.peer_goaway_ = true;
    bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    // A DATA frame with no data that does not end its stream (empty, or padding alone: up to
    // 255 bytes each) does nothing but cost us its reading.
    if (frame->hd.type == NGHTTP2_DATA && frame->hd.length == frame->data.padlen && !end_stream) {
      TakeControlFrame(self);
      if (self.failed_) return 0;
    }
    H2Session::Stream* stream = self.Find(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    if (end_stream) stream->remote_closed = true;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      if (auto timeout = wire::ParseGrpcTimeout(stream->grpc_timeout)) {
        // Clamped before it is added: "99999999H" is 3.6e20 ns, past what the clock's signed
        // 64-bit nanoseconds hold, and only a timeout shorter than the request's own limit
        // can move the deadline anyway.
        const auto bounded =
            std::min(*timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                   self.options_.limits.request_timeout));
        stream->request_deadline = std::min(stream->request_deadline, self.now_ + bounded);
      }
      // Refusals that need no body are answered as soon as the headers are known.
      if (stream->headers_too_large || stream->method != "POST" ||
          !wire::IsGrpcContentType(stream->content_type) ||
          (!stream->grpc_encoding.empty() && stream->grpc_encoding != "identity")) {
        self.Dispatch(stream);
        return 0;
      }
    }
    if (end_stream && (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        !stream->dispatched) {
      self.Dispatch(stream);
    }
    return 0;
  }

  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* ud) {
    H2Session& self = Self(ud);
    if (frame->hd.type == NGHTTP2_GOAWAY && !self.failed_ && !self.goaway_sent_) {
      // Neither ours (Shutdown, Fail): nghttp2 answered a connection error it found while
      // reading (nghttp2_session.c, session_inflate_handle_invalid_connection), and its reason
      // is the GOAWAY's debug data. Only now does nghttp2_session_want_read turn 0.
      self.failed_ = true;
      self.Report(TransportEvent::kProtocolError,
                  std::string_view(reinterpret_cast<const char*>(frame->goaway.opaque_data),
                                   frame->goaway.opaque_data_len));
      return 0;
    }
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
      return 0;
    }
    if (frame->hd.stream_id == self.goaway_after_stream_) self.SendPendingGoaway();
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    H2Session::Stream* stream = self.Find(frame->hd.stream_id);
    if (stream != nullptr && stream->reset_after_response && !stream->remote_closed) {
      stream->reset_after_response = false;
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* ud) {
    H2Session& self = Self(ud);
    auto it = std::ranges::find(self.streams_, stream_id, [](const auto& s) { return s->id; });
    // Reset before its answer went out whole: the GOAWAY it held back goes now.
    if (stream_id == self.goaway_after_stream_) self.SendPendingGoaway();
    if (it == self.streams_.end()) return 0;
    self.Uncharge(it->get());
    self.streams_.erase(it);
    if (--self.streams_open_ == 0) self.idle_since_ = self.now_;
    return 0;
  }

  // Frame types past the nine of RFC 9113: taken as extensions of ours (so that nghttp2 calls
  // OnBeginFrame for them, which it does not for a type it merely skips), their bytes
  // dropped as they arrive and the frame itself ignored.
  static int OnExtensionChunk(nghttp2_session*, const nghttp2_frame_hd*, const uint8_t*, size_t,
                              void*) {
    return 0;
  }
  static int UnpackExtension(nghttp2_session*, void**, const nghttp2_frame_hd*, void*) {
    return NGHTTP2_ERR_CANCEL;
  }

  static ssize_t ReadResponse(nghttp2_session* session, int32_t stream_id, uint8_t* buf,
                              size_t length, uint32_t* data_flags, nghttp2_data_source* source,
                              void*) {
    auto* stream = static_cast<H2Session::Stream*>(source->ptr);
    size_t n = std::min(length, stream->response.size() - stream->response_sent);
    std::memcpy(buf, stream->response.data() + stream->response_sent, n);
    stream->response_sent += n;
    if (stream->response_sent == stream->response.size()) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      nghttp2_nv trailer = Header("grpc-status", "0");  // OK: only an OK reply has a body
      if (nghttp2_submit_trailer(session, stream_id, &trailer, 1) != 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
    }
    return static_cast<ssize_t>(n);
  }
};

H2Session::H2Session(const H2SessionOptions& options, std::string peer, SteadyClock::time_point now)
    : options_(options),
      peer_(std::move(peer)),
      now_(now),
      started_(now),
      idle_since_(now),
      control_{static_cast<double>(options.limits.control_frame_burst), now},
      resets_{static_cast<double>(options.limits.reset_burst), now} {
  const H2Limits& limits = options_.limits;
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_option* option = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0 || nghttp2_option_new(&option) != 0) {
    failed_ = true;  // out of memory: Receive() answers false and the connection closes
    if (callbacks != nullptr) nghttp2_session_callbacks_del(callbacks);
    return;
  }
  nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, H2Callbacks::OnBeginFrame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, H2Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, H2Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, H2Callbacks::OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, H2Callbacks::OnFrameRecv);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, H2Callbacks::OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, H2Callbacks::OnFrameSend);
  nghttp2_session_callbacks_set_on_extension_chunk_recv_callback(callbacks,
                                                                 H2Callbacks::OnExtensionChunk);
  nghttp2_session_callbacks_set_unpack_extension_callback(callbacks, H2Callbacks::UnpackExtension);
  for (int type = NGHTTP2_CONTINUATION + 1; type <= 0xff; ++type) {
    nghttp2_option_set_user_recv_extension_type(option, static_cast<uint8_t>(type));
  }
  nghttp2_option_set_max_continuations(option, limits.max_continuations);
  nghttp2_option_set_stream_reset_rate_limit(option, limits.reset_burst, limits.resets_per_second);
  nghttp2_option_set_max_outbound_ack(option, limits.max_outbound_acks);
  // Closed streams are not kept for priority bookkeeping: a reset flood leaves nothing behind.
  nghttp2_option_set_no_closed_streams(option, 1);
  nghttp2_option_set_max_settings(option, 16);
  // nghttp2's allocations charge the connection's account: past its share one fails, and
  // nghttp2 ends the session (NGHTTP2_ERR_NOMEM).
  int rv = nghttp2_session_server_new3(
      &session_, callbacks, this, option,
      options_.memory != nullptr ? options_.memory->nghttp2_allocator() : nullptr);
  nghttp2_session_callbacks_del(callbacks);
  nghttp2_option_del(option);
  if (rv != 0) {
    session_ = nullptr;
    failed_ = true;
    return;
  }
  int32_t window = std::max<int32_t>(kMinWindow, static_cast<int32_t>(limits.max_request_bytes) +
                                                     static_cast<int32_t>(wire::kGrpcPrefixSize));
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits.max_header_list_bytes},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(window)},
  };
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 3) != 0) failed_ = true;
}

H2Session::~H2Session() {
  if (session_ != nullptr) nghttp2_session_del(session_);
  for (const auto& stream : streams_) Uncharge(stream.get());
}

bool H2Session::Charge(Stream* stream, size_t n) {
  if (options_.memory == nullptr) return true;
  // Never the last of the share: nghttp2 needs some to answer RESOURCE_EXHAUSTED with.
  constexpr uint64_t kAnswerHeadroom = 16 * 1024;
  if (!options_.memory->TryCharge(n, kAnswerHeadroom)) return false;
  stream->charged += n;
  return true;
}

void H2Session::Uncharge(Stream* stream) {
  if (options_.memory != nullptr) options_.memory->Release(stream->charged);
  stream->charged = 0;
}

void H2Session::Report(TransportEvent event, std::string_view detail) {
  if (options_.events != nullptr) options_.events->OnTransportEvent(event, peer_, detail);
}

void H2Session::Fail(TransportEvent event, uint32_t error_code, std::string_view detail) {
  if (failed_) return;
  failed_ = true;
  Report(event, detail);
  if (session_ != nullptr) nghttp2_session_terminate_session(session_, error_code);
}

H2Session::Stream* H2Session::Find(int32_t stream_id) const {
  if (session_ == nullptr || stream_id <= 0) return nullptr;
  return static_cast<Stream*>(nghttp2_session_get_stream_user_data(session_, stream_id));
}

bool H2Session::Receive(std::string_view bytes, SteadyClock::time_point now) {
  if (failed_ || session_ == nullptr) return false;
  now_ = now;
  ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(bytes.data()),
                                        bytes.size());
  if (rv < 0) {
    // nghttp2 has queued its GOAWAY where the error allows one (bad preface: none).
    const bool flooded = rv == NGHTTP2_ERR_FLOODED;
    Fail(flooded ? TransportEvent::kControlFrameFlood : TransportEvent::kProtocolError,
         flooded ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR,
         nghttp2_strerror(static_cast<int>(rv)));
    return false;
  }
  // A connection error nghttp2 answers itself is reported when its GOAWAY is sent (OnFrameSend).
  return !failed_;
}

void H2Session::TakeOutput(std::string* out, size_t max_bytes) {
  if (session_ == nullptr) return;
  size_t taken = 0;
  while (taken < max_bytes) {
    const uint8_t* data = nullptr;
    ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n <= 0) {
      if (n < 0) failed_ = true;
      return;
    }
    out->append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    taken += static_cast<size_t>(n);
  }
}

size_t H2Session::queued_output_frames() const {
  return session_ == nullptr ? 0 : nghttp2_session_get_outbound_queue_size(session_);
}

bool H2Session::Finished() const {
  if (session_ == nullptr) return true;
  if (nghttp2_session_want_write(session_) != 0) return false;
  return failed_ || nghttp2_session_want_read(session_) == 0;
}

void H2Session::Shutdown() {
  if (session_ == nullptr) return;
  ShutdownAfter(nghttp2_session_get_last_proc_stream_id(session_));
}

void H2Session::ShutdownAfter(int32_t last_stream_id, int32_t after_stream) {
  if (session_ == nullptr || failed_ || goaway_sent_) return;
  goaway_sent_ = true;
  goaway_last_stream_id_ = last_stream_id;
  goaway_after_stream_ = after_stream;
  if (after_stream == 0) SendPendingGoaway();
}

void H2Session::SendPendingGoaway() {
  goaway_after_stream_ = 0;
  if (failed_) return;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, goaway_last_stream_id_, NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

SteadyClock::time_point H2Session::NextDeadline() const {
  if (session_ == nullptr || failed_) return SteadyClock::time_point::max();
  SteadyClock::time_point next = SteadyClock::time_point::max();
  if (answered_ == 0 && !goaway_sent_) next = started_ + options_.limits.first_request_timeout;
  if (streams_started_ > 0 && streams_open_ == 0 && !goaway_sent_) {
    next = std::min(next, idle_since_ + options_.limits.idle_timeout);
  }
  for (const auto& stream : streams_) {
    if (!stream->dispatched) next = std::min(next, stream->request_deadline);
    if (stream->delayed) next = std::min(next, stream->reply_due);
    next = std::min(next, stream->close_deadline);
  }
  return next;
}

void H2Session::OnTimer(SteadyClock::time_point now) {
  if (session_ == nullptr || failed_) return;
  now_ = now;
  // Streams may close while we answer; walk a copy of the ids.
  std::vector<int32_t> ids;
  for (const auto& stream : streams_) ids.push_back(stream->id);
  for (int32_t id : ids) {
    Stream* stream = Find(id);
    if (stream == nullptr) continue;
    if (stream->delayed && stream->reply_due <= now) {
      std::unique_ptr<GrpcReply> reply = std::move(stream->delayed);
      stream->reply_due = SteadyClock::time_point::max();
      Respond(stream, std::move(*reply));
    } else if (!stream->dispatched && stream->request_deadline <= now) {
      Report(TransportEvent::kRequestTimeout);
      stream->dispatched = true;
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
      // No new stream on this connection: one that let a request run out may not keep the
      // connection by opening more (streams already open finish or run out in turn).
      Shutdown();
    } else if (stream->close_deadline <= now) {
      Report(TransportEvent::kOutputStalled);
      stream->close_deadline = SteadyClock::time_point::max();
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    }
  }
  if (goaway_sent_) return;
  if (answered_ == 0 && now >= started_ + options_.limits.first_request_timeout) {
    // Nothing answered yet: whatever the connection holds open is not a call going well.
    peer_at_fault_ = true;
    Fail(TransportEvent::kFirstRequestTimeout, NGHTTP2_NO_ERROR);
  } else if (streams_started_ > 0 && streams_open_ == 0 &&
             now >= idle_since_ + options_.limits.idle_timeout) {
    Report(TransportEvent::kIdleTimeout);
    Shutdown();
  }
}

void H2Session::Dispatch(Stream* stream) {
  if (stream->dispatched) return;
  stream->dispatched = true;
  if (goaway_sent_ && stream->id > goaway_last_stream_id_) {
    // Begun before a GOAWAY that excludes it (an answer that closed the connection): the
    // client retries it elsewhere, so it must not be run here.
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_REFUSED_STREAM);
    return;
  }
  if (stream->method != "POST") return RespondHttp(stream, "405");
  if (!wire::IsGrpcContentType(stream->content_type)) return RespondHttp(stream, "415");
  GrpcReply reply;
  if (stream->over_budget) {
    // Other connections hold the memory connections may have beyond their baseline, or
    // this peer address's share of it: refused at once rather than queued, and the node's
    // client retries.
    Report(TransportEvent::kKeptBytesOverBudget);
    reply.code = GrpcCode::kResourceExhausted;
    reply.error_message =
        "the service holds as much request memory as it may for this address or in all; retry "
        "later";
    return Respond(stream, std::move(reply));
  }
  if (stream->headers_too_large) {
    Report(TransportEvent::kHeaderListTooLarge);
    reply.code = GrpcCode::kResourceExhausted;
    reply.error_message = "request header list larger than max (" +
                          std::to_string(options_.limits.max_header_list_bytes) + " bytes)";
    return Respond(stream, std::move(reply));
  }
  if (!stream->grpc_encoding.empty() && stream->grpc_encoding != "identity") {
    // Nothing compressed is ever inflated: a request that would need it is refused unread.
    reply.code = GrpcCode::kUnimplemented;
    reply.error_message = "grpc-encoding \"" + stream->grpc_encoding.substr(0, 32) +
                          "\" is not supported; send uncompressed messages";
    return Respond(stream, std::move(reply));
  }
  if (stream->body_too_large) {
    Report(TransportEvent::kRequestTooLarge);
    reply.code = GrpcCode::kResourceExhausted;
    reply.error_message = "grpc: received message larger than max (" +
                          std::to_string(options_.limits.max_request_bytes) + " bytes)";
    return Respond(stream, std::move(reply));
  }
  wire::FrameError error = wire::FrameError::kTruncated;
  std::optional<wire::GrpcFrame> frame = wire::ParseUnaryGrpcBody(stream->body, &error);
  if (!frame) {
    reply.code = GrpcCode::kInternal;
    reply.error_message = error == wire::FrameError::kTrailingBytes
                              ? "grpc: a unary request carried more than one message"
                          : error == wire::FrameError::kBadFlag
                              ? "grpc: unexpected Compressed-Flag in the message prefix"
                              : "grpc: the request message is truncated";
    return Respond(stream, std::move(reply));
  }
  if (frame->compressed) {
    reply.code = GrpcCode::kUnimplemented;
    reply.error_message = "grpc: compressed messages are not supported";
    return Respond(stream, std::move(reply));
  }
  GrpcCall call;
  call.path = stream->path;
  call.authority = stream->authority;
  call.peer = peer_;
  for (const auto& [key, value] : stream->metadata) call.metadata.emplace_back(key, value);
  call.message = frame->message;
  options_.handler->Handle(call, &reply);
  if (reply.delay.count() > 0) {
    stream->reply_due = now_ + reply.delay;
    stream->delayed = std::make_unique<GrpcReply>(std::move(reply));
    return;
  }
  Respond(stream, std::move(reply));
}

void H2Session::Respond(Stream* stream, GrpcReply reply) {
  // GOAWAY naming this stream as the last: streams the peer opened after it are unprocessed
  // by the protocol's own rule (RFC 9113, section 6.8), so a client retries them on a new
  // connection; earlier ones still open finish. The frame follows the answer: RFC 9113 lets
  // it go first, but Python's h2 (under grpclib) closes its connection on a GOAWAY and then
  // raises a ProtocolError on the answer, so that caller would never read why it was refused.
  if (reply.close_connection) closed_by_reply_ = true;
  if (reply.close_connection && reply.caller_at_fault) peer_at_fault_ = true;
  if (reply.close_connection || ++answered_ >= options_.limits.max_calls_per_connection) {
    ShutdownAfter(stream->id, stream->id);
  }
  // The request is no longer needed; only the response stays until the stream closes.
  stream->body.clear();
  stream->body.shrink_to_fit();
  stream->close_deadline = now_ + options_.limits.request_timeout;
  if (reply.code == GrpcCode::kOk) {
    stream->response = wire::FrameGrpcMessage(reply.message);
    nghttp2_nv headers[] = {Header(":status", "200"), Header("content-type", "application/grpc"),
                            Header("grpc-accept-encoding", "identity")};
    nghttp2_data_provider provider;
    provider.source.ptr = stream;
    provider.read_callback = H2Callbacks::ReadResponse;
    nghttp2_submit_response(session_, stream->id, headers, 3, &provider);
    return;
  }
  // Trailers-only: the status in the one HEADERS frame, which ends the stream.
  std::string status = std::to_string(static_cast<int>(reply.code));
  std::string message = wire::PercentEncode(reply.error_message);
  nghttp2_nv headers[] = {Header(":status", "200"), Header("content-type", "application/grpc"),
                          Header("grpc-status", status), Header("grpc-message", message)};
  nghttp2_submit_response(session_, stream->id, headers, message.empty() ? 3 : 4, nullptr);
  EndUnfinishedRequest(stream);
}

void H2Session::RespondHttp(Stream* stream, const char* http_status) {
  if (++answered_ >= options_.limits.max_calls_per_connection) {
    ShutdownAfter(stream->id, stream->id);
  }
  stream->close_deadline = now_ + options_.limits.request_timeout;
  nghttp2_nv headers[] = {Header(":status", http_status)};
  nghttp2_submit_response(session_, stream->id, headers, 1, nullptr);
  EndUnfinishedRequest(stream);
}

// Answered before the request ended (a refusal on its headers, a body over the limit): the
// peer need not send the rest (RFC 9113 section 8.1: RST_STREAM NO_ERROR after a complete
// response). Submitted once the response has gone out (H2Callbacks::OnFrameSend): submitted
// now, nghttp2 would drop the response still queued for the stream.
void H2Session::EndUnfinishedRequest(Stream* stream) {
  if (!stream->remote_closed) stream->reset_after_response = true;
}

}  // namespace hotfix::service
