#include "node/host/hotfix_pointer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include "captured_log.h"
#include "node/go/go_json.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace hotfix::node {
namespace {

using testsupport::ModeOf;
using testsupport::ReadFile;
using testsupport::TempDir;
using unittest::CapturedLog;

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

HotfixPointer Parsed(std::string_view json) {
  StatusOr<HotfixPointer> p = ParseHotfixPointer(json);
  EXPECT_TRUE(p.ok()) << json << ": " << p.status().ToString();
  return p.ok() ? *p : HotfixPointer{};
}

std::string ParseError(std::string_view json) {
  StatusOr<HotfixPointer> p = ParseHotfixPointer(json);
  EXPECT_FALSE(p.ok()) << json << " parsed";
  return p.ok() ? "" : p.status().message();
}

// --- AgentBaker's ParseHotfixConfig tests ---

TEST(ParseHotfixPointerTest, ParsesTheHotfixesObjectDirectly) {
  HotfixPointer p = Parsed(R"({"hotfixes":{"202604.01":"202604.01.1","202605.01":"202605.01.2"}})");
  EXPECT_EQ(p.hotfixes, (HotfixMap{{"202604.01", "202604.01.1"}, {"202605.01", "202605.01.2"}}));
  EXPECT_EQ(p.version, "");
  EXPECT_EQ(p.scripts_version, "");
}

TEST(ParseHotfixPointerTest, ToleratesSurroundingWhitespace) {
  HotfixPointer p = Parsed("  \n\t {\"hotfixes\":{\"202604.01\":\"202604.01.1\"}} \r\n ");
  EXPECT_EQ(p.hotfixes, (HotfixMap{{"202604.01", "202604.01.1"}}));
}

TEST(ParseHotfixPointerTest, EmptyBodyIsABenignNoOp) {
  for (const char* body : {"", "   ", "\n\t "}) {
    HotfixPointer p = Parsed(body);
    EXPECT_EQ(p, HotfixPointer{}) << "body [" << body << "]";
    EXPECT_EQ(ResolveVersion(p, "202604.01.1", NullLogger()), "");
  }
}

TEST(ParseHotfixPointerTest, InvalidJsonIsAnError) {
  EXPECT_THAT(ParseError("not json"), HasSubstr("unmarshaling hotfix pointer JSON"));
}

TEST(ParseHotfixPointerTest, SharesParserShapeWithDownloadHotfix) {
  const std::string body =
      R"({"version":"202604.01.5","scripts_version":"202604.01.7","hotfixes":{"202604.01":"202604.01.1"}})";
  TempDir dir;
  StatusOr<HotfixPointer> from_file = ReadHotfixPointer(dir.Write("hotfix.json", body));
  ASSERT_TRUE(from_file.ok());
  EXPECT_EQ(Parsed(body), *from_file);
  EXPECT_EQ(from_file->version, "202604.01.5");
  EXPECT_EQ(from_file->scripts_version, "202604.01.7");
}

// --- Go encoding/json properties (docs/REFERENCE.md, "Served config") ---

TEST(ParseHotfixPointerTest, MatchesKeysCaseInsensitively) {
  HotfixPointer p = Parsed(R"({"VERSION":"a","Scripts_Version":"b","HotFixes":{"k":"v"}})");
  EXPECT_EQ(p, (HotfixPointer{"a", "b", {{"k", "v"}}}));
}

TEST(ParseHotfixPointerTest, FoldsTheNonAsciiRunesGoFoldsToAscii) {
  // Go 1.21+ foldName: upper(lower(r)). U+017F (long s) -> S, U+0130 and U+0131 -> I.
  HotfixPointer p = Parsed(
      "{\"\xC5\xBF"
      "cripts_ver\xC5\xBFion\":\"s\",\"vers\xC4\xB0on\":\"v\"}");
  EXPECT_EQ(p.scripts_version, "s");
  EXPECT_EQ(p.version, "v");
  // Other non-ASCII letters do not match.
  EXPECT_EQ(Parsed("{\"v\xC3\xA9rsion\":\"x\"}"), HotfixPointer{});
}

TEST(ParseHotfixPointerTest, IgnoresUnknownKeysWhateverTheirValue) {
  HotfixPointer p = Parsed(
      R"({"sha256":"abc","n":1.5e300,"o":{"version":"inner","hotfixes":{"x":"y"}},"a":[{"hotfixes":1}],"version":"v"})");
  EXPECT_EQ(p, (HotfixPointer{"v", "", {}}));
}

TEST(ParseHotfixPointerTest, NullIsUnset) {
  EXPECT_EQ(Parsed("null"), HotfixPointer{});
  EXPECT_EQ(Parsed(R"({"version":null,"scripts_version":null,"hotfixes":null})"), HotfixPointer{});
  // null leaves a string untouched but sets a map to nil, as in Go.
  EXPECT_EQ(Parsed(R"({"version":"a","version":null})").version, "a");
  EXPECT_THAT(Parsed(R"({"hotfixes":{"a":"1"},"hotfixes":null})").hotfixes, IsEmpty());
  // A null map value is stored as the zero string.
  EXPECT_EQ(Parsed(R"({"hotfixes":{"a":null}})").hotfixes, (HotfixMap{{"a", ""}}));
}

TEST(ParseHotfixPointerTest, RepeatedKeysFollowGo) {
  EXPECT_EQ(Parsed(R"({"version":"a","Version":"b"})").version, "b");
  // A second "hotfixes" object adds to the map instead of replacing it.
  EXPECT_EQ(Parsed(R"({"hotfixes":{"a":"1","b":"1"},"hotfixes":{"b":"2","c":"3"}})").hotfixes,
            (HotfixMap{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
}

TEST(ParseHotfixPointerTest, WrongTypesAreErrors) {
  EXPECT_EQ(ParseError(R"({"version":1})"),
            "unmarshaling hotfix pointer JSON: json: cannot unmarshal number into Go struct field "
            "hotfixConfig.version of type string");
  EXPECT_THAT(ParseError(R"({"scripts_version":true})"),
              HasSubstr("cannot unmarshal bool into Go struct field hotfixConfig.scripts_version"));
  EXPECT_THAT(ParseError(R"({"hotfixes":{"202604.01":1}})"),
              HasSubstr("cannot unmarshal number into Go struct field hotfixConfig.hotfixes of "
                        "type string"));
  EXPECT_THAT(ParseError(R"({"hotfixes":{"a":{"b":"c"}}})"), HasSubstr("cannot unmarshal object"));
  EXPECT_THAT(ParseError(R"({"hotfixes":[]})"),
              HasSubstr("cannot unmarshal array into Go struct field hotfixConfig.hotfixes of "
                        "type map[string]string"));
  EXPECT_THAT(ParseError(R"({"hotfixes":"202604.01.1"})"), HasSubstr("cannot unmarshal string"));
  EXPECT_THAT(ParseError(R"({"version":["a"]})"), HasSubstr("cannot unmarshal array"));
}

TEST(ParseHotfixPointerTest, NonObjectTopLevelIsAnError) {
  for (const char* body : {"[]", R"(["hotfixes"])", R"("text")", "5", "true"}) {
    EXPECT_THAT(ParseError(body), HasSubstr("into Go value of type main.hotfixConfig")) << body;
  }
}

TEST(ParseHotfixPointerTest, ReportsTheFirstTypeError) {
  EXPECT_THAT(ParseError(R"({"version":1,"scripts_version":2})"), HasSubstr(".version of"));
}

TEST(ParseHotfixPointerTest, SyntaxErrorWinsOverTypeError) {
  // Go validates the whole document before decoding.
  std::string error = ParseError(R"({"version":1,})");
  EXPECT_THAT(error, HasSubstr("unmarshaling hotfix pointer JSON: "));
  EXPECT_THAT(error, Not(HasSubstr("cannot unmarshal")));
  EXPECT_THAT(ParseError(R"({"hotfixes":{"a":"1"}} trailing)"),
              HasSubstr("unmarshaling hotfix pointer JSON"));
}

TEST(ParseHotfixPointerTest, ReplacesInvalidUtf8InStringsLikeGo) {
  // One U+FFFD per invalid byte: a stray byte, a truncated sequence, an overlong, a surrogate.
  EXPECT_EQ(Parsed("{\"version\":\"a\xFF"
                   "b\"}")
                .version,
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(Parsed("{\"version\":\"\xE2\x82\"}").version, "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Parsed("{\"version\":\"\xC0\xAF\"}").version, "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Parsed("{\"version\":\"\xED\xA0\x80\"}").version,
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Parsed("{\"hotfixes\":{\"k\xFF\":\"v\"}}").hotfixes,
            (HotfixMap{{"k\xEF\xBF\xBD", "v"}}));
  // Valid multi-byte text is kept as is.
  EXPECT_EQ(Parsed("{\"version\":\"\xC3\xA9\xF0\x9F\x98\x80\"}").version,
            "\xC3\xA9\xF0\x9F\x98\x80");
}

TEST(ParseHotfixPointerTest, DecodesUnpairedSurrogateEscapesAsReplacementLikeGo) {
  EXPECT_EQ(Parsed(R"({"version":"\ud800"})").version, "\xEF\xBF\xBD");
  EXPECT_EQ(Parsed(R"({"version":"\udc00x"})").version, "\xEF\xBF\xBDx");
  EXPECT_EQ(Parsed(R"({"version":"\ud800\u0041"})").version,
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(Parsed(R"({"version":"\ud83d\ude00"})").version, "\xF0\x9F\x98\x80");
  EXPECT_EQ(Parsed(R"({"version":"\ud800\ud83d\ude00"})").version, "\xEF\xBF\xBD\xF0\x9F\x98\x80");
  // An escaped backslash before "u" is not an escape.
  EXPECT_EQ(Parsed(R"({"version":"\\ud800"})").version, "\\ud800");
}

TEST(ParseHotfixPointerTest, InvalidBytesOutsideStringsAreSyntaxErrors) {
  EXPECT_THAT(ParseError("\xFF{}"), HasSubstr("unmarshaling hotfix pointer JSON"));
  EXPECT_THAT(ParseError("{\"version\":\"a\"}\xFF"), HasSubstr("unmarshaling hotfix pointer JSON"));
  EXPECT_THAT(ParseError("{\"version\":\"a\\x\"}"), HasSubstr("unmarshaling hotfix pointer JSON"));
}

TEST(ParseHotfixPointerTest, NestingDeeperThanGoAllowsIsAnError) {
  const std::string ok = R"({"x":)" + std::string(500, '[') + std::string(500, ']') + "}";
  EXPECT_EQ(Parsed(ok), HotfixPointer{});
  const std::string deep = R"({"x":)" + std::string(20000, '[') + std::string(20000, ']') + "}";
  EXPECT_THAT(ParseError(deep), HasSubstr("exceeded max depth"));
}

TEST(ParseHotfixPointerTest, NumbersBeyondADoubleAreOnlySyntaxCheckedLikeGo) {
  // nlohmann alone rejects 1e400; Go skips it in an unknown key and calls it a type error in ours.
  EXPECT_EQ(Parsed(R"({"x":1e400,"y":[-1E+999],"version":"v"})").version, "v");
  EXPECT_THAT(ParseError(R"({"version":-1e400})"), HasSubstr("cannot unmarshal number"));
  EXPECT_THAT(ParseError(R"({"hotfixes":{"a":1e999}})"), HasSubstr("cannot unmarshal number"));
  EXPECT_THAT(ParseError("1e400"), HasSubstr("cannot unmarshal number into Go value"));
  // Invalid numbers stay syntax errors, and a number inside a string is text.
  EXPECT_THAT(ParseError(R"({"x":01e400})"), Not(HasSubstr("cannot unmarshal")));
  EXPECT_THAT(ParseError(R"({"x":1e400e1})"), Not(HasSubstr("cannot unmarshal")));
  EXPECT_EQ(Parsed(R"({"version":"1e400"})").version, "1e400");
  EXPECT_EQ(Parsed(R"({"x":1e-400,"version":"v"})").version, "v");
}

TEST(ParseHotfixPointerTest, TrimsUnicodeWhiteSpaceLikeGo) {
  // bytes.TrimSpace also trims U+00A0, U+0085, U+2028, \v and \f.
  EXPECT_EQ(Parsed("\xC2\xA0\v{\"version\":\"v\"}\f\xE2\x80\xA8").version, "v");
  EXPECT_EQ(Parsed("\xC2\x85\xC2\xA0"), HotfixPointer{});
}

// --- Serialisation (docs/REFERENCE.md, "The pointer file") ---

TEST(SerializeHotfixPointerTest, CompactWithFieldsInReferenceOrder) {
  HotfixPointer p{"202604.01.5", "202604.01.7", {{"202605.01", "b"}, {"202604.01", "a"}}};
  EXPECT_EQ(SerializeHotfixPointer(p),
            R"({"version":"202604.01.5","scripts_version":"202604.01.7",)"
            R"("hotfixes":{"202604.01":"a","202605.01":"b"}})");
}

TEST(SerializeHotfixPointerTest, OmitsEmptyVersionFieldsButAlwaysWritesHotfixes) {
  EXPECT_EQ(SerializeHotfixPointer({}), R"({"hotfixes":{}})");
  EXPECT_EQ(SerializeHotfixPointer({"", "s", {}}), R"({"scripts_version":"s","hotfixes":{}})");
  EXPECT_EQ(SerializeHotfixPointer({"v", "", {}}), R"({"version":"v","hotfixes":{}})");
}

TEST(SerializeHotfixPointerTest, SortsMapKeysBytewise) {
  HotfixPointer p{"", "", {{"b", "1"}, {"a", "2"}, {"B", "3"}, {"\xC3\xA9", "4"}}};
  EXPECT_EQ(SerializeHotfixPointer(p),
            "{\"hotfixes\":{\"B\":\"3\",\"a\":\"2\",\"b\":\"1\",\"\xC3\xA9\":\"4\"}}");
}

TEST(SerializeHotfixPointerTest, EscapesLikeGoJsonMarshal) {
  HotfixPointer p{"<a&b>", "\xE2\x80\xA8\xE2\x80\xA9", {{"q\"\\", "\n\t\r\b\f\x01\x7F\xC3\xA9"}}};
  EXPECT_EQ(SerializeHotfixPointer(p),
            R"({"version":"\u003ca\u0026b\u003e","scripts_version":"\u2028\u2029",)"
            "\"hotfixes\":{\"q\\\"\\\\\":\"\\n\\t\\r\\b\\f\\u0001\x7F\xC3\xA9\"}}");
}

TEST(SerializeHotfixPointerTest, ReplacesInvalidUtf8InsteadOfFailing) {
  HotfixPointer p{"a\xFF", "", {{"k\xC0", "v\xE2\x82"}}};
  EXPECT_EQ(SerializeHotfixPointer(p),
            "{\"version\":\"a\xEF\xBF\xBD\",\"hotfixes\":{\"k\xEF\xBF\xBD\":"
            "\"v\xEF\xBF\xBD\xEF\xBF\xBD\"}}");
}

TEST(SerializeHotfixPointerTest, RoundTripsThroughTheParser) {
  HotfixPointer p{"202604.01.5", "<&>", {{"202604.01", "202604.01.9"}, {"x", "\xE2\x80\xA8"}}};
  EXPECT_EQ(Parsed(SerializeHotfixPointer(p)), p);
}

TEST(EscapeJsonLikeGoTest, LeavesEverythingElseAlone) {
  EXPECT_EQ(EscapeJsonLikeGo(R"({"a":"x\u003c"})"), R"({"a":"x\u003c"})");
  EXPECT_EQ(EscapeJsonLikeGo("\xE2\x80\xA7\xE2\x80\xAA"), "\xE2\x80\xA7\xE2\x80\xAA");
}

// --- AgentBaker's ReadHotfixConfig tests, plus read errors ---

TEST(ReadHotfixPointerTest, MissingFileIsTheZeroPointer) {
  StatusOr<HotfixPointer> p = ReadHotfixPointer("/nonexistent/path");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, HotfixPointer{});
}

TEST(ReadHotfixPointerTest, BlankFileIsTheZeroPointer) {
  TempDir dir;
  for (const char* content : {"", "  \n", "\xC2\xA0"}) {
    StatusOr<HotfixPointer> p = ReadHotfixPointer(dir.Write("hotfix.json", content));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(*p, HotfixPointer{});
  }
}

TEST(ReadHotfixPointerTest, LegacyVersion) {
  TempDir dir;
  StatusOr<HotfixPointer> p =
      ReadHotfixPointer(dir.Write("h.json", R"({"version": "202604.01.1"})"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->version, "202604.01.1");
  EXPECT_THAT(p->hotfixes, IsEmpty());
}

TEST(ReadHotfixPointerTest, BaseToVersionMap) {
  TempDir dir;
  StatusOr<HotfixPointer> p = ReadHotfixPointer(dir.Write(
      "h.json", R"({"hotfixes": {"202604.01": "202604.01.1", "202605.30": "202605.30.2"}})"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hotfixes, (HotfixMap{{"202604.01", "202604.01.1"}, {"202605.30", "202605.30.2"}}));
}

TEST(ReadHotfixPointerTest, InvalidJsonNamesThePath) {
  TempDir dir;
  const std::string path = dir.Write("h.json", "not json");
  StatusOr<HotfixPointer> p = ReadHotfixPointer(path);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("parsing hotfix config " + path + ": "));
  EXPECT_THAT(p.status().message(), Not(HasSubstr("unmarshaling")));
}

TEST(ReadHotfixPointerTest, IgnoresExtraFields) {
  TempDir dir;
  StatusOr<HotfixPointer> p =
      ReadHotfixPointer(dir.Write("h.json", R"({"version": "202604.01.1", "sha256": "abc123"})"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->version, "202604.01.1");
}

TEST(ReadHotfixPointerTest, DecodesTheUntrimmedFileLikeTheReference) {
  // readHotfixConfig only uses TrimSpace to detect a blank file; "\v" is not JSON white space.
  TempDir dir;
  StatusOr<HotfixPointer> p = ReadHotfixPointer(dir.Write("h.json", "\v{\"version\":\"v\"}"));
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(Parsed("\v{\"version\":\"v\"}").version, "v");
}

TEST(ReadHotfixPointerTest, DirectoryIsAnError) {
  TempDir dir;
  std::filesystem::create_directory(dir.File("h.json"));
  StatusOr<HotfixPointer> p = ReadHotfixPointer(dir.File("h.json"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("Is a directory"));
}

TEST(ReadHotfixPointerTest, PathThroughARegularFileIsAnErrorNotMissing) {
  TempDir dir;
  const std::string file = dir.Write("plain", "x");
  StatusOr<HotfixPointer> p = ReadHotfixPointer(file + "/h.json");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("Not a directory"));
}

TEST(ReadHotfixPointerTest, RefusesFilesOverOneMebibyte) {
  TempDir dir;
  const std::string big = R"({"version":")" + std::string(1 << 20, 'x') + R"("})";
  StatusOr<HotfixPointer> p = ReadHotfixPointer(dir.Write("h.json", big));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("larger than 1048576 bytes"));
}

// --- AgentBaker's HotfixBaseFromVersion tests ---

TEST(HotfixBaseFromVersionTest, ReferenceTable) {
  const std::pair<const char*, const char*> ok[] = {
      {"202604.01.1", "202604.01"},   {"202604.01.0", "202604.01"},
      {"202605.30.2", "202605.30"},   {"  202604.01.1  ", "202604.01"},
      {"202604.01.1-1", "202604.01"}, {"202604.01.1.7", "202604.01"}};
  for (const auto& [in, base] : ok) {
    StatusOr<std::string> got = HotfixBaseFromVersion(in);
    ASSERT_TRUE(got.ok()) << in;
    EXPECT_EQ(*got, base) << in;
  }
  for (const char* bad : {"202604.01", "202604.01.", "dev", "", ".01.1", "202604..1", "   "}) {
    EXPECT_FALSE(HotfixBaseFromVersion(bad).ok()) << bad;
  }
}

TEST(HotfixBaseFromVersionTest, ErrorQuotesTheUntrimmedInputLikeGo) {
  EXPECT_EQ(HotfixBaseFromVersion("dev").status().message(),
            R"(version "dev" is not in YYYYMM.DD.PATCH form)");
  EXPECT_EQ(HotfixBaseFromVersion(" 202604.01\n").status().message(),
            R"(version " 202604.01\n" is not in YYYYMM.DD.PATCH form)");
  EXPECT_EQ(HotfixBaseFromVersion("a\"b\x01\xFF\xC2\xA0\xC3\xA9").status().message(),
            R"(version "a\"b\x01\xff\u00a0)"
            "\xC3\xA9"
            R"(" is not in YYYYMM.DD.PATCH form)");
}

// --- AgentBaker's HotfixConfigResolveVersion tests ---

TEST(ResolveVersionTest, EmptyMapFallsBackToLegacyVersion) {
  EXPECT_EQ(ResolveVersion({"202604.01.1", "", {}}, "202604.01.0", NullLogger()), "202604.01.1");
  EXPECT_EQ(ResolveVersion({" 202604.01.1\n", "", {}}, "dev", NullLogger()), "202604.01.1");
}

TEST(ResolveVersionTest, EmptyConfig) {
  EXPECT_EQ(ResolveVersion({}, "202604.01.0", NullLogger()), "");
}

TEST(ResolveVersionTest, MapHit) {
  HotfixPointer p{"", "", {{"202604.01", "202604.01.1"}, {"202605.30", "202605.30.2"}}};
  EXPECT_EQ(ResolveVersion(p, "202604.01.0", NullLogger()), "202604.01.1");
  EXPECT_EQ(ResolveVersion(p, "202605.30.0", NullLogger()), "202605.30.2");
}

TEST(ResolveVersionTest, MapMissIsDefaultDeny) {
  HotfixPointer p{"", "", {{"202604.01", "202604.01.1"}, {"202605.30", "202605.30.2"}}};
  EXPECT_EQ(ResolveVersion(p, "202606.09.0", NullLogger()), "");
}

TEST(ResolveVersionTest, LeadingZeroDayIsMatchedLiterally) {
  HotfixPointer p{"", "", {{"202604.01", "202604.01.1"}}};
  EXPECT_EQ(ResolveVersion(p, "202604.01.0", NullLogger()), "202604.01.1");
  EXPECT_EQ(ResolveVersion(p, "202604.1.0", NullLogger()), "");
}

TEST(ResolveVersionTest, MapBeatsLegacyVersion) {
  HotfixPointer p{"202604.01.9", "", {{"202604.01", "202604.01.1"}}};
  EXPECT_EQ(ResolveVersion(p, "202604.01.0", NullLogger()), "202604.01.1");
  p.hotfixes = {{"202605.01", "202605.01.1"}};
  EXPECT_EQ(ResolveVersion(p, "202604.01.0", NullLogger()), "");
}

TEST(ResolveVersionTest, TrimsTheMapValue) {
  HotfixPointer p{"", "", {{"202604.01", " \t202604.01.1 "}}};
  EXPECT_EQ(ResolveVersion(p, "202604.01.0", NullLogger()), "202604.01.1");
}

TEST(ResolveVersionTest, UnparseableCurrentWithMapWarnsAndSkips) {
  CapturedLog log;
  HotfixPointer p{"", "", {{"202604.01", "202604.01.1"}}};
  EXPECT_EQ(ResolveVersion(p, "dev", log.logger()), "");
  std::vector<nlohmann::json> lines = log.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["level"], "WARN");
  EXPECT_EQ(lines[0]["msg"], "cannot derive hotfix base from current version, skipping hotfix");
  EXPECT_EQ(lines[0]["current"], "dev");
  EXPECT_EQ(lines[0]["error"], R"(version "dev" is not in YYYYMM.DD.PATCH form)");
}

TEST(ResolveVersionTest, NoWarningWithoutAMap) {
  CapturedLog log;
  EXPECT_EQ(ResolveVersion({"202604.01.1", "", {}}, "dev", log.logger()), "202604.01.1");
  EXPECT_THAT(log.Lines(), IsEmpty());
}

// --- The cold-start shape ---

TEST(DecodeLenientHotfixesTest, ReadsOnlyTheHotfixesMap) {
  StatusOr<HotfixMap> m = DecodeLenientHotfixes(
      R"({"version":5,"scripts_version":[1],"api_server_config":{"api_server_name":"x"},"HOTFIXES":{"202604.01":"202604.01.5"}})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (HotfixMap{{"202604.01", "202604.01.5"}}));
}

TEST(DecodeLenientHotfixesTest, AbsentOrNullMapIsEmpty) {
  for (const char* doc : {R"({"version":"v1"})", R"({"hotfixes":null})", "null", "{}"}) {
    StatusOr<HotfixMap> m = DecodeLenientHotfixes(doc);
    ASSERT_TRUE(m.ok()) << doc;
    EXPECT_THAT(*m, IsEmpty()) << doc;
  }
}

TEST(DecodeLenientHotfixesTest, ErrorsHaveNoPrefix) {
  StatusOr<HotfixMap> m = DecodeLenientHotfixes(R"({"hotfixes":{"a":1}})");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "json: cannot unmarshal number into Go struct field .hotfixes of type string");
  EXPECT_FALSE(DecodeLenientHotfixes("").ok());  // not trimmed: empty is "unexpected end"
  EXPECT_FALSE(DecodeLenientHotfixes("[]").ok());
  EXPECT_FALSE(DecodeLenientHotfixes("{").ok());
}

}  // namespace
}  // namespace hotfix::node
