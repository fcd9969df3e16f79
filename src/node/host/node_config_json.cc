#include "node/host/node_config_json.h"

#include <nlohmann/json.hpp>
#include <span>
#include <utility>
#include <vector>

#include "common/json_error.h"

namespace hotfix::node {
namespace {

using Json = nlohmann::json;

// protojson's default recursion limit.
constexpr size_t kMaxNestingDepth = 10000;

// protojson field numbers of the fields we read (aksnodeconfig.v1).
constexpr int kVersionField = 1;            // Configuration.version
constexpr int kApiServerConfigField = 4;    // Configuration.api_server_config
constexpr int kKubernetesCaCertField = 17;  // Configuration.kubernetes_ca_cert
constexpr int kApiServerNameField = 2;      // ApiServerConfig.api_server_name

// Decodes the AKSNodeConfig fields check-hotfix needs the way protojson.Unmarshal with
// DiscardUnknown does: fields are set as they are read, so on an error the ones before it are
// kept, while a sub-message is set only once it decoded completely. Fields are accepted under
// their proto or JSON name, a field seen twice (under either) and a wrong JSON type are errors,
// unknown fields are skipped and null leaves a field unset. Other AKSNodeConfig fields are
// skipped without type checks: their schema is not part of this port.
class ProtojsonNodeConfigDecoder {
 public:
  bool null() { return Scalar("null", nullptr); }
  bool boolean(bool b) { return Scalar(b ? "true" : "false", nullptr); }
  bool number_integer(Json::number_integer_t n) { return Scalar(std::to_string(n), nullptr); }
  bool number_unsigned(Json::number_unsigned_t n) { return Scalar(std::to_string(n), nullptr); }
  bool number_float(Json::number_float_t, const std::string& raw) { return Scalar(raw, nullptr); }
  bool string(std::string& s) { return Scalar(Json(s).dump(), &s); }
  bool binary(Json::binary_t&) { return Scalar("binary", nullptr); }  // not produced by JSON
  bool start_object(std::size_t) { return Open(/*object=*/true); }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(/*object=*/false); }
  bool end_array() { return Close(); }
  bool key(std::string& k);
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e);

  NodeConfigFields TakeFields() { return std::move(fields_); }

 private:
  // What the next value is decoded into.
  enum class Slot { kTop, kVersion, kApiServerConfig, kKubernetesCaCert, kApiServerName, kIgnored };
  enum class Frame { kConfiguration, kApiServerConfig, kSkipped };
  struct Field {
    Slot slot;
    int number;
    const char* json_name;  // protojson names string fields by their JSON name in errors
  };

  bool Scalar(const std::string& raw, const std::string* text);
  bool StringField(const std::string& raw, const std::string* text);
  bool Open(bool object);
  bool Close();
  bool Skipping() const { return !frames_.empty() && frames_.back() == Frame::kSkipped; }
  bool Fail(std::string message) {
    fields_.parse_error = "proto: " + std::move(message);
    return false;  // stops the parser: protojson returns at the first error
  }

  std::vector<Frame> frames_;
  Slot slot_ = Slot::kTop;
  const char* slot_json_name_ = "";
  std::vector<int> seen_;      // field numbers per open message, for duplicate detection
  std::vector<size_t> marks_;  // where each open message's seen_ entries start
  std::string pending_api_server_name_;
  NodeConfigFields fields_;
};

bool ProtojsonNodeConfigDecoder::key(std::string& k) {
  if (Skipping()) return true;
  static const Field kConfigurationFields[] = {
      {Slot::kVersion, kVersionField, "version"},
      {Slot::kApiServerConfig, kApiServerConfigField, "apiServerConfig"},
      {Slot::kKubernetesCaCert, kKubernetesCaCertField, "kubernetesCaCert"},
  };
  static const Field kApiServerConfigFields[] = {
      {Slot::kApiServerName, kApiServerNameField, "apiServerName"},
  };
  static const std::pair<const char*, const char*> kProtoNames[] = {
      {"api_server_config", "apiServerConfig"},
      {"kubernetes_ca_cert", "kubernetesCaCert"},
      {"api_server_name", "apiServerName"},
  };
  std::string_view json_name = k;  // the proto name maps onto the JSON name
  for (const auto& [proto_name, camel_name] : kProtoNames) {
    if (k == proto_name) json_name = camel_name;
  }
  const bool in_config = frames_.back() == Frame::kConfiguration;
  slot_ = Slot::kIgnored;
  for (const Field& f : in_config ? std::span<const Field>(kConfigurationFields)
                                  : std::span<const Field>(kApiServerConfigFields)) {
    if (json_name != f.json_name) continue;
    for (size_t i = marks_.back(); i < seen_.size(); ++i) {
      if (seen_[i] == f.number) return Fail("duplicate field " + Json(k).dump());
    }
    seen_.push_back(f.number);
    slot_ = f.slot;
    slot_json_name_ = f.json_name;
  }
  return true;
}

bool ProtojsonNodeConfigDecoder::StringField(const std::string& raw, const std::string* text) {
  if (text == nullptr && raw == "null") return true;  // null: the field stays unset
  if (text == nullptr) {
    return Fail(std::string("invalid value for string field ") + slot_json_name_ + ": " + raw);
  }
  if (slot_ == Slot::kKubernetesCaCert) fields_.kubernetes_ca_cert = *text;
  if (slot_ == Slot::kApiServerName) pending_api_server_name_ = *text;
  return true;  // version is only type-checked
}

bool ProtojsonNodeConfigDecoder::Scalar(const std::string& raw, const std::string* text) {
  if (Skipping()) return true;
  switch (slot_) {
    case Slot::kTop:
      return Fail("unexpected token " + raw);
    case Slot::kApiServerConfig:
      return raw == "null" && text == nullptr ? true : Fail("unexpected token " + raw);
    case Slot::kVersion:
    case Slot::kKubernetesCaCert:
    case Slot::kApiServerName:
      return StringField(raw, text);
    case Slot::kIgnored:
      return true;
  }
  return true;
}

bool ProtojsonNodeConfigDecoder::Open(bool object) {
  if (frames_.size() >= kMaxNestingDepth) return Fail("exceeded max recursion depth");
  const char* token = object ? "{" : "[";
  Frame frame = Frame::kSkipped;
  if (!Skipping()) {
    switch (slot_) {
      case Slot::kTop:
      case Slot::kApiServerConfig:
        if (!object) return Fail(std::string("unexpected token ") + token);
        frame = slot_ == Slot::kTop ? Frame::kConfiguration : Frame::kApiServerConfig;
        marks_.push_back(seen_.size());
        pending_api_server_name_.clear();
        break;
      case Slot::kVersion:
      case Slot::kKubernetesCaCert:
      case Slot::kApiServerName:
        return StringField(token, nullptr);
      case Slot::kIgnored:
        break;
    }
  }
  frames_.push_back(frame);
  return true;
}

bool ProtojsonNodeConfigDecoder::Close() {
  const Frame closed = frames_.back();
  frames_.pop_back();
  if (closed == Frame::kSkipped) return true;
  seen_.resize(marks_.back());
  marks_.pop_back();
  // A sub-message is set on its parent only once it decoded completely.
  if (closed == Frame::kApiServerConfig) fields_.api_server_name = pending_api_server_name_;
  return true;
}

bool ProtojsonNodeConfigDecoder::parse_error(std::size_t, const std::string&,
                                             const nlohmann::detail::exception& e) {
  return Fail("syntax error: " + JsonErrorText(e));
}

}  // namespace

NodeConfigFields ParseNodeConfigFields(std::string_view json) {
  ProtojsonNodeConfigDecoder decoder;
  try {
    Json::sax_parse(json, &decoder);
  } catch (const Json::exception& e) {  // not expected from sax_parse; never let it escape
    NodeConfigFields fields = decoder.TakeFields();
    fields.parse_error = std::string("proto: ") + e.what();
    return fields;
  }
  return decoder.TakeFields();
}

}  // namespace hotfix::node
