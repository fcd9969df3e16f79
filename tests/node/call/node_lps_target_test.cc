#include "node/call/lps_target.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "common/host_port.h"

namespace hotfix::node {
namespace {

using testsupport::ModeOf;
using testsupport::ReadFile;
using testsupport::TempDir;
using unittest::CapturedLog;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using Json = nlohmann::json;

const char kCaPem[] = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n";

std::string SnakeConfig(const std::string& fqdn, const std::string& ca_b64) {
  return R"({"version":"v1","api_server_config":{"api_server_name":")" + fqdn +
         R"("},"kubernetes_ca_cert":")" + ca_b64 + R"("})";
}

std::string NbcContent(const std::string& fqdn, const std::string& ca_b64) {
  return R"(PROVISION_OUTPUT="/tmp/out"; API_SERVER_NAME=)" + fqdn + R"( KUBE_CA_CRT=")" + ca_b64 +
         R"(" /usr/bin/nohup /bin/bash -c "/bin/bash /opt/azure/containers/provision_start.sh")";
}

// --- AgentBaker's LPSTargetFromNodeConfig tests ---

TEST(ResolveLpsTargetTest, ReadsFqdnAndDecodesCaFromNodeConfig) {
  TempDir dir;
  const std::string config =
      dir.Write("config.json", SnakeConfig("myapi.example.com", EncodeStdBase64(kCaPem)));
  StatusOr<LpsTarget> t = ResolveLpsTarget(config, dir.File("nonexistent-nbc.sh"), NullLogger());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->api_server_name, "myapi.example.com");
  EXPECT_EQ(t->ca_pem, kCaPem);
  EXPECT_EQ(t->source_path, config);
}

TEST(ResolveLpsTargetTest, MissingApiServerNameIsAnError) {
  TempDir dir;
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.Write("config.json", R"({"version":"v1"})"),
                                           dir.File("nbc.sh"), NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "node config has no api_server_config.api_server_name");
}

TEST(ResolveLpsTargetTest, MissingConfigFallsBackToNbcCmd) {
  TempDir dir;
  CapturedLog log;
  const std::string config = dir.File("config.json");
  const std::string nbc =
      dir.Write("nbc.sh", NbcContent("fallback.example.com", EncodeStdBase64(kCaPem)));
  StatusOr<LpsTarget> t = ResolveLpsTarget(config, nbc, log.logger());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->api_server_name, "fallback.example.com");
  EXPECT_EQ(t->ca_pem, kCaPem);
  EXPECT_EQ(t->source_path, nbc);
  std::vector<Json> lines = log.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["level"], "INFO");
  EXPECT_EQ(lines[0]["msg"], "node config not found, trying nbc-cmd.sh fallback");
  EXPECT_EQ(lines[0]["path"], config);
  EXPECT_EQ(lines[1]["level"], "INFO");
  EXPECT_EQ(lines[1]["msg"], "loaded LPS target from nbc-cmd.sh fallback");
  EXPECT_EQ(lines[1]["fqdn"], "fallback.example.com");
  EXPECT_EQ(lines[1]["path"], nbc);
}

TEST(ResolveLpsTargetTest, MissingConfigAndMissingNbcCmdIsAnError) {
  TempDir dir;
  const std::string nbc = dir.File("nbc.sh");
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("config.json"), nbc, NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), StartsWith("reading nbc-cmd " + nbc + ": "));
  EXPECT_THAT(t.status().message(), HasSubstr("No such file or directory"));
}

// --- AgentBaker's LPSTargetFromNBCCmd tests ---

TEST(NbcFallbackTest, ReadsFqdnAndDecodesCa) {
  TempDir dir;
  const std::string nbc =
      dir.Write("nbc.sh", "API_SERVER_NAME=myapi.example.com KUBE_CA_CRT=\"" +
                              EncodeStdBase64(kCaPem) + "\" /usr/bin/nohup /bin/bash -c \"x\"");
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("none.json"), nbc, NullLogger());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->api_server_name, "myapi.example.com");
  EXPECT_EQ(t->ca_pem, kCaPem);
}

TEST(NbcFallbackTest, MissingApiServerName) {
  TempDir dir;
  const std::string nbc = dir.Write("nbc.sh", "KUBE_CA_CRT=\"" + EncodeStdBase64(kCaPem) + "\"");
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("none.json"), nbc, NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "nbc-cmd " + nbc + " has no API_SERVER_NAME");
}

TEST(NbcFallbackTest, EmptyApiServerNameCountsAsMissing) {
  TempDir dir;
  const std::string nbc = dir.Write("nbc.sh", "API_SERVER_NAME= KUBE_CA_CRT=\"\"");
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("none.json"), nbc, NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("has no API_SERVER_NAME"));
}

TEST(NbcFallbackTest, MissingFile) {
  TempDir dir;
  StatusOr<LpsTarget> t =
      ResolveLpsTarget(dir.File("none.json"), "/nonexistent/nbc.sh", NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), StartsWith("reading nbc-cmd /nonexistent/nbc.sh: "));
}

TEST(NbcFallbackTest, CaIsOptional) {
  TempDir dir;
  const std::string nbc = dir.Write("nbc.sh", "API_SERVER_NAME=myapi.example.com /bin/true");
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("none.json"), nbc, NullLogger());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->api_server_name, "myapi.example.com");
  EXPECT_EQ(t->ca_pem, "");
}

TEST(NbcFallbackTest, InvalidCa) {
  TempDir dir;
  const std::string nbc =
      dir.Write("nbc.sh", R"(API_SERVER_NAME=myapi.example.com KUBE_CA_CRT="not-base64")");
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("none.json"), nbc, NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "decoding nbc-cmd KUBE_CA_CRT: illegal base64 data at input byte 3");
}

TEST(NbcFallbackTest, OversizedFileIsAnErrorNamingTheLimit) {
  TempDir dir;
  const std::string nbc =
      dir.Write("nbc.sh", NbcContent("x.example.com", "") + std::string((4 << 20) + 1, ' '));
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("none.json"), nbc, NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), StartsWith("reading nbc-cmd " + nbc + ": "));
  EXPECT_THAT(t.status().message(), HasSubstr("larger than 4194304 bytes"));
}

TEST(NbcFallbackTest, DirectoryIsAReadError) {
  TempDir dir;
  fs::create_directory(dir.File("nbc.sh"));
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("none.json"), dir.File("nbc.sh"), NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), StartsWith("reading nbc-cmd "));
  EXPECT_THAT(t.status().message(), HasSubstr("Is a directory"));
}

// --- Source selection ---

TEST(ResolveLpsTargetTest, WhenBothExistOnlyTheConfigIsUsed) {
  TempDir dir;
  CapturedLog log;
  const std::string config = dir.Write("config.json", SnakeConfig("config.example.com", ""));
  fs::create_directory(dir.File("nbc.sh"));  // would fail if it were read
  StatusOr<LpsTarget> t = ResolveLpsTarget(config, dir.File("nbc.sh"), log.logger());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->api_server_name, "config.example.com");
  EXPECT_THAT(log.Lines(), IsEmpty());
}

TEST(ResolveLpsTargetTest, ConfigWithoutFqdnDoesNotFallBack) {
  TempDir dir;
  const std::string nbc = dir.Write("nbc.sh", NbcContent("fallback.example.com", ""));
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.Write("config.json", "{}"), nbc, NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("api_server_name"));
}

TEST(ResolveLpsTargetTest, UnreadableConfigIsAnErrorWithoutFallback) {
  TempDir dir;
  CapturedLog log;
  fs::create_directory(dir.File("config.json"));
  const std::string nbc = dir.Write("nbc.sh", NbcContent("fallback.example.com", ""));
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.File("config.json"), nbc, log.logger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              StartsWith("reading node config " + dir.File("config.json").string()));
  EXPECT_THAT(t.status().message(), HasSubstr("Is a directory"));
  EXPECT_THAT(log.Lines(), IsEmpty());
}

TEST(ResolveLpsTargetTest, OversizedConfigIsAnErrorNamingTheLimit) {
  TempDir dir;
  const std::string big = SnakeConfig("x.example.com", "") + std::string((4 << 20) + 1, ' ');
  StatusOr<LpsTarget> t =
      ResolveLpsTarget(dir.Write("config.json", big), dir.File("nbc.sh"), NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), StartsWith("reading node config "));
  EXPECT_THAT(t.status().message(), HasSubstr("larger than 4194304 bytes"));
}

TEST(ResolveLpsTargetTest, CaDecodeErrorFromConfig) {
  TempDir dir;
  StatusOr<LpsTarget> t =
      ResolveLpsTarget(dir.Write("config.json", SnakeConfig("x.example.com", "QUJD QUJD")),
                       dir.File("nbc.sh"), NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "decoding node config kubernetes_ca_cert: illegal base64 data at input byte 4");
}

TEST(ResolveLpsTargetTest, CaWithEscapedNewlinesDecodes) {
  TempDir dir;
  std::string b64 = EncodeStdBase64(kCaPem);
  b64.insert(8, "\\r\\n");  // JSON escapes for CR LF, which base64 ignores
  StatusOr<LpsTarget> t = ResolveLpsTarget(dir.Write("config.json", SnakeConfig("x", b64)),
                                           dir.File("nbc.sh"), NullLogger());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ca_pem, kCaPem);
}

TEST(ResolveLpsTargetTest, ParseErrorIsLoggedAndThePartialConfigUsed) {
  TempDir dir;
  CapturedLog log;
  const std::string config = dir.Write(
      "config.json", R"({"api_server_config":{"api_server_name":"partial.example.com"},"x":)");
  StatusOr<LpsTarget> t = ResolveLpsTarget(config, dir.File("nbc.sh"), log.logger());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->api_server_name, "partial.example.com");
  std::vector<Json> lines = log.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["level"], "INFO");
  EXPECT_EQ(lines[0]["msg"], "node config parsed with errors, continuing with partial config");
  EXPECT_THAT(lines[0]["error"].get<std::string>(), StartsWith("proto: syntax error: "));
}

TEST(ResolveLpsTargetTest, MissingFqdnAfterAParseErrorNamesIt) {
  TempDir dir;
  StatusOr<LpsTarget> t =
      ResolveLpsTarget(dir.Write("config.json", R"({"api_server_config":{"api_server_name":"x")"),
                       dir.File("nbc.sh"), NullLogger());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              StartsWith("node config has no api_server_config.api_server_name (parse error: "
                         "proto: syntax error: "));
  EXPECT_EQ(t.status().message().back(), ')');
}

// --- ParseNodeConfigFields: protojson rules ---

TEST(ParseNodeConfigFieldsTest, AcceptsProtoAndJsonNames) {
  NodeConfigFields snake = ParseNodeConfigFields(
      R"({"api_server_config":{"api_server_name":"a"},"kubernetes_ca_cert":"Yw=="})");
  NodeConfigFields camel = ParseNodeConfigFields(
      R"({"apiServerConfig":{"apiServerName":"a"},"kubernetesCaCert":"Yw=="})");
  NodeConfigFields mixed = ParseNodeConfigFields(
      R"({"apiServerConfig":{"api_server_name":"a"},"kubernetes_ca_cert":"Yw=="})");
  for (const NodeConfigFields& f : {snake, camel, mixed}) {
    EXPECT_EQ(f.api_server_name, "a");
    EXPECT_EQ(f.kubernetes_ca_cert, "Yw==");
    EXPECT_EQ(f.parse_error, "");
  }
}

TEST(ParseNodeConfigFieldsTest, NamesAreCaseSensitive) {
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"API_SERVER_CONFIG":{"api_server_name":"a"},"KubernetesCaCert":"Yw=="})");
  EXPECT_EQ(f.api_server_name, "");
  EXPECT_EQ(f.kubernetes_ca_cert, "");
  EXPECT_EQ(f.parse_error, "");
}

TEST(ParseNodeConfigFieldsTest, BothNamesOfOneFieldAreADuplicate) {
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"api_server_config":{"api_server_name":"a"},"apiServerConfig":{"apiServerName":"b"}})");
  EXPECT_EQ(f.api_server_name, "a");  // decoded before the error
  EXPECT_EQ(f.parse_error, R"(proto: duplicate field "apiServerConfig")");

  f = ParseNodeConfigFields(R"({"kubernetesCaCert":"Yw==","kubernetes_ca_cert":"Yw=="})");
  EXPECT_EQ(f.parse_error, R"(proto: duplicate field "kubernetes_ca_cert")");
  EXPECT_EQ(f.kubernetes_ca_cert, "Yw==");

  f = ParseNodeConfigFields(R"({"version":"v1","version":"v2"})");
  EXPECT_EQ(f.parse_error, R"(proto: duplicate field "version")");
}

TEST(ParseNodeConfigFieldsTest, DuplicateInsideTheSubMessageDiscardsIt) {
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"kubernetes_ca_cert":"Yw==","api_server_config":{"api_server_name":"a","apiServerName":"b"}})");
  EXPECT_EQ(f.api_server_name, "");
  EXPECT_EQ(f.kubernetes_ca_cert, "Yw==");
  EXPECT_EQ(f.parse_error, R"(proto: duplicate field "apiServerName")");
}

TEST(ParseNodeConfigFieldsTest, SameNameInDifferentMessagesIsNotADuplicate) {
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"api_server_config":{"version":"x","api_server_name":"a"},"version":"v1"})");
  EXPECT_EQ(f.api_server_name, "a");
  EXPECT_EQ(f.parse_error, "");
}

TEST(ParseNodeConfigFieldsTest, NonStringValuesAreTypeErrors) {
  NodeConfigFields f = ParseNodeConfigFields(R"({"api_server_config":{"api_server_name":5}})");
  EXPECT_EQ(f.api_server_name, "");
  EXPECT_EQ(f.parse_error, "proto: invalid value for string field apiServerName: 5");

  f = ParseNodeConfigFields(
      R"({"api_server_config":{"api_server_name":"a"},"kubernetes_ca_cert":true})");
  EXPECT_EQ(f.api_server_name, "a");
  EXPECT_EQ(f.kubernetes_ca_cert, "");
  EXPECT_EQ(f.parse_error, "proto: invalid value for string field kubernetesCaCert: true");

  f = ParseNodeConfigFields(R"({"kubernetes_ca_cert":{"a":"b"}})");
  EXPECT_EQ(f.parse_error, "proto: invalid value for string field kubernetesCaCert: {");

  f = ParseNodeConfigFields(R"({"api_server_config":"a"})");
  EXPECT_EQ(f.parse_error, R"(proto: unexpected token "a")");

  f = ParseNodeConfigFields(R"({"api_server_config":[{"api_server_name":"a"}]})");
  EXPECT_EQ(f.parse_error, "proto: unexpected token [");
  EXPECT_EQ(f.api_server_name, "");
}

TEST(ParseNodeConfigFieldsTest, ATypeErrorStopsTheDecode) {
  // version is a known string field: protojson stops there, so later fields are not read.
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"version":1,"api_server_config":{"api_server_name":"a"},"kubernetes_ca_cert":"Yw=="})");
  EXPECT_EQ(f.api_server_name, "");
  EXPECT_EQ(f.kubernetes_ca_cert, "");
  EXPECT_EQ(f.parse_error, "proto: invalid value for string field version: 1");
}

TEST(ParseNodeConfigFieldsTest, NullIsUnsetButCountsAsSeen) {
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"api_server_config":null,"kubernetes_ca_cert":null,"version":null})");
  EXPECT_EQ(f.api_server_name, "");
  EXPECT_EQ(f.kubernetes_ca_cert, "");
  EXPECT_EQ(f.parse_error, "");

  f = ParseNodeConfigFields(R"({"api_server_config":{"api_server_name":null}})");
  EXPECT_EQ(f.api_server_name, "");
  EXPECT_EQ(f.parse_error, "");

  f = ParseNodeConfigFields(R"({"kubernetes_ca_cert":null,"kubernetesCaCert":"Yw=="})");
  EXPECT_EQ(f.kubernetes_ca_cert, "");
  EXPECT_EQ(f.parse_error, R"(proto: duplicate field "kubernetesCaCert")");
}

TEST(ParseNodeConfigFieldsTest, UnknownFieldsAreSkippedWhateverTheyHold) {
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"other":{"api_server_name":"evil","api_server_config":{"api_server_name":"evil"}},)"
      R"("list":[1,2.5e10,{"kubernetes_ca_cert":5},null,true],)"
      R"("api_server_config":{"extra":[{"a":null}],"api_server_name":"a","more":{}},)"
      R"("hotfixes":{"202604.01":"202604.01.1"},"kubernetes_ca_cert":"Yw=="})");
  EXPECT_EQ(f.api_server_name, "a");
  EXPECT_EQ(f.kubernetes_ca_cert, "Yw==");
  EXPECT_EQ(f.parse_error, "");
}

TEST(ParseNodeConfigFieldsTest, KeepsFieldsDecodedBeforeASyntaxError) {
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"kubernetes_ca_cert":"Yw==","api_server_config":{"api_server_name":"a"},"x":tru})");
  EXPECT_EQ(f.api_server_name, "a");
  EXPECT_EQ(f.kubernetes_ca_cert, "Yw==");
  EXPECT_THAT(f.parse_error, StartsWith("proto: syntax error: "));
}

TEST(ParseNodeConfigFieldsTest, IncompleteSubMessageIsNotSet) {
  NodeConfigFields f = ParseNodeConfigFields(
      R"({"kubernetes_ca_cert":"Yw==","api_server_config":{"api_server_name":"a",)");
  EXPECT_EQ(f.api_server_name, "");
  EXPECT_EQ(f.kubernetes_ca_cert, "Yw==");
  EXPECT_THAT(f.parse_error, StartsWith("proto: syntax error: "));
}

TEST(ParseNodeConfigFieldsTest, TrailingDataIsAnErrorAfterEverythingDecoded) {
  NodeConfigFields f =
      ParseNodeConfigFields(R"({"api_server_config":{"api_server_name":"a"}} {"x":1})");
  EXPECT_EQ(f.api_server_name, "a");
  EXPECT_THAT(f.parse_error, StartsWith("proto: syntax error: "));
}

TEST(ParseNodeConfigFieldsTest, InvalidUtf8IsAnErrorAsInProtojson) {
  NodeConfigFields f = ParseNodeConfigFields(
      "{\"api_server_config\":{\"api_server_name\":\"a\"},\"other\":\"\xFF\"}");
  EXPECT_EQ(f.api_server_name, "a");
  EXPECT_THAT(f.parse_error, StartsWith("proto: syntax error: "));
}

TEST(ParseNodeConfigFieldsTest, NonObjectDocumentsAreErrors) {
  EXPECT_EQ(ParseNodeConfigFields("null").parse_error, "proto: unexpected token null");
  EXPECT_EQ(ParseNodeConfigFields("[]").parse_error, "proto: unexpected token [");
  EXPECT_EQ(ParseNodeConfigFields(R"("x")").parse_error, R"(proto: unexpected token "x")");
  EXPECT_THAT(ParseNodeConfigFields("").parse_error, StartsWith("proto: syntax error: "));
  EXPECT_EQ(ParseNodeConfigFields("{}").parse_error, "");
}

TEST(ParseNodeConfigFieldsTest, DeepNestingIsBoundedNotACrash) {
  const std::string deep = R"({"x":)" + std::string(20000, '[') + std::string(20000, ']') + "}";
  EXPECT_EQ(ParseNodeConfigFields(deep).parse_error, "proto: exceeded max recursion depth");
}

// --- The cold-start source (AgentBaker's ColdStartHotfixConfig tests; docs/REFERENCE.md) ---

TEST(ReadColdStartHotfixesTest, MissingFileIsNotPresent) {
  StatusOr<std::optional<HotfixMap>> m = ReadColdStartHotfixes("/nonexistent/config.json");
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->has_value());
}

TEST(ReadColdStartHotfixesTest, PresentPointerIsParsed) {
  TempDir dir;
  StatusOr<std::optional<HotfixMap>> m = ReadColdStartHotfixes(
      dir.Write("config.json", R"({"version":"v1","hotfixes":{"202604.01":"202604.01.5"}})"));
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(m->has_value());
  EXPECT_EQ(**m, (HotfixMap{{"202604.01", "202604.01.5"}}));
}

TEST(ReadColdStartHotfixesTest, NoHotfixesKeyIsNotPresent) {
  TempDir dir;
  for (const char* doc : {R"({"version":"v1"})", R"({"hotfixes":null})", R"({"hotfixes":{}})"}) {
    StatusOr<std::optional<HotfixMap>> m = ReadColdStartHotfixes(dir.Write("config.json", doc));
    ASSERT_TRUE(m.ok()) << doc;
    EXPECT_FALSE(m->has_value()) << doc;
  }
}

TEST(ReadColdStartHotfixesTest, OtherFieldsOfAnyTypeAreIgnored) {
  TempDir dir;
  StatusOr<std::optional<HotfixMap>> m = ReadColdStartHotfixes(dir.Write(
      "config.json",
      R"({"version":1,"api_server_config":{"api_server_name":"x"},"Hotfixes":{"a":"b"}})"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->has_value());
  EXPECT_EQ(**m, (HotfixMap{{"a", "b"}}));
}

TEST(ReadColdStartHotfixesTest, InvalidJsonOrWrongTypesAreErrors) {
  TempDir dir;
  for (const char* doc : {"not json", R"({"hotfixes":{"a":1}})", R"({"hotfixes":[]})", "[]", ""}) {
    StatusOr<std::optional<HotfixMap>> m = ReadColdStartHotfixes(dir.Write("config.json", doc));
    ASSERT_FALSE(m.ok()) << doc;
    EXPECT_THAT(m.status().message(), StartsWith("parsing cold-start hotfixes from node config: "))
        << doc;
  }
}

TEST(ReadColdStartHotfixesTest, ReadErrorNamesThePath) {
  TempDir dir;
  fs::create_directory(dir.File("config.json"));
  StatusOr<std::optional<HotfixMap>> m = ReadColdStartHotfixes(dir.File("config.json"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              StartsWith("reading node config " + dir.File("config.json").string()));
}

// --- Host normalisation (docs/REFERENCE.md, "Inputs") ---

std::string DialTarget(std::string_view api_server_name) {
  return JoinHostPort(ApiServerHost(api_server_name), 443);
}

TEST(ApiServerHostTest, ReferenceTable) {
  EXPECT_EQ(DialTarget("host"), "host:443");
  EXPECT_EQ(DialTarget("host:443"), "host:443");
  EXPECT_EQ(DialTarget("host:6443"), "host:443");
  EXPECT_EQ(DialTarget("host:"), "host:443");
  EXPECT_EQ(DialTarget("1.2.3.4"), "1.2.3.4:443");
  EXPECT_EQ(DialTarget("::1"), "[::1]:443");
  EXPECT_EQ(DialTarget("[::1]:6443"), "[::1]:443");
  EXPECT_EQ(DialTarget("https://host"), "https:443");
  EXPECT_EQ(DialTarget("https://host:443"), "[https://host:443]:443");
  EXPECT_EQ(DialTarget("[fe80::1]"), "[[fe80::1]]:443");
}

TEST(ApiServerHostTest, GoSplitHostPortErrorsKeepTheRawName) {
  EXPECT_EQ(ApiServerHost("myaks-dns.hcp.eastus.azmk8s.io"), "myaks-dns.hcp.eastus.azmk8s.io");
  EXPECT_EQ(ApiServerHost("[::1]"), "[::1]");              // missing port
  EXPECT_EQ(ApiServerHost("[::1]x:80"), "[::1]x:80");      // ']' not followed by the last colon
  EXPECT_EQ(ApiServerHost("[::1]:80:90"), "[::1]:80:90");  // too many colons
  EXPECT_EQ(ApiServerHost("[::1:80"), "[::1:80");          // missing ']'
  EXPECT_EQ(ApiServerHost("a]:80"), "a]:80");              // unexpected ']'
  EXPECT_EQ(ApiServerHost("a[b:80"), "a[b:80");            // unexpected '['
  EXPECT_EQ(ApiServerHost("[a[b]:80"), "[a[b]:80");        // unexpected '[' inside brackets
  EXPECT_EQ(ApiServerHost(""), "");
}

TEST(ApiServerHostTest, GoSplitHostPortSuccessesDropThePort) {
  EXPECT_EQ(ApiServerHost("[host]:80"), "host");
  EXPECT_EQ(ApiServerHost("[]:80"), "");
  EXPECT_EQ(ApiServerHost(":80"), "");
  EXPECT_EQ(ApiServerHost("host:port"), "host");
}

TEST(JoinHostPortTest, BracketsHostsWithColons) {
  EXPECT_EQ(JoinHostPort("example.com", 443), "example.com:443");
  EXPECT_EQ(JoinHostPort("::1", 8443), "[::1]:8443");
  EXPECT_EQ(JoinHostPort("", 443), ":443");
  EXPECT_EQ(JoinHostPort("h", 0), "h:0");
  EXPECT_EQ(JoinHostPort("h", 65535), "h:65535");
}

}  // namespace
}  // namespace hotfix::node
