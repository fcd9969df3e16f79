// The component file's format (src/service/store/component_file.h): which names are
// components, what each file must hold, and the digest that names a file.
#include "service/store/component_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hotfix::service {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAks[] = "aksNodeController";
constexpr char kAksV1[] = R"({"hotfixes":{"202604.01":"202604.01.1"}})";
constexpr char kAksBad[] = R"({"hotfixes":{"202604.01":"x"}})";

// ---- Component names --------------------------------------------------------------------

TEST(ComponentNameTest, AcceptsTheDocumentedAlphabet) {
  const std::vector<std::string> names = {
      "a", "Z", kAks, "a1", "a_b", "a.b", "a-b", "a..b", "x.json", "A" + std::string(63, 'z')};
  for (const std::string& name : names) {
    EXPECT_TRUE(IsValidComponentName(name)) << name;
  }
}

TEST(ComponentNameTest, RefusesEverythingElse) {
  const std::vector<std::string> names = {"",
                                          "../etc/passwd",
                                          "a/b",
                                          "/a",
                                          ".hidden",
                                          "..",
                                          "1abc",
                                          "_a",
                                          "-a",
                                          "a b",
                                          "a\nb",
                                          "a\\b",
                                          "a:b",
                                          "é",
                                          "aé",
                                          "A" + std::string(64, 'z'),
                                          std::string("a\0b", 3)};
  for (const std::string& name : names) {
    EXPECT_FALSE(IsValidComponentName(name)) << name;
  }
}

// ---- Validation -------------------------------------------------------------------------

struct ValidationCase {
  const char* component;
  const char* json;
  const char* error;  // nullptr: valid; otherwise the exact message
};

TEST(ValidateComponentConfigTest, Matrix) {
  const ValidationCase cases[] = {
      {kAks, kAksV1, nullptr},
      {kAks, R"({"hotfixes":{}})", nullptr},
      {kAks, R"({"hotfixes":{"202604.01":"202604.01.12","202605.02":"202605.02.0"}})", nullptr},
      {kAks, R"({"hotfixes":{"2026.01":"2026.01.1"}})",
       R"(aksNodeController.json: hotfixes["2026.01"]: key is not YYYYMM.DD)"},
      {kAks, R"({"hotfixes":{"202604.1a":"202604.1a.1"}})",
       R"(aksNodeController.json: hotfixes["202604.1a"]: key is not YYYYMM.DD)"},
      {kAks, kAksBad,
       R"(aksNodeController.json: hotfixes["202604.01"]: value "x" is not YYYYMM.DD.PATCH)"},
      {kAks, R"({"hotfixes":{"202604.01":"202604.01."}})",
       R"(aksNodeController.json: hotfixes["202604.01"]: value "202604.01." is not YYYYMM.DD.PATCH)"},
      {kAks, R"({"hotfixes":{"202604.01":"202604.01.1 "}})",
       R"(aksNodeController.json: hotfixes["202604.01"]: value "202604.01.1 " is not YYYYMM.DD.PATCH)"},
      {kAks, R"({"hotfixes":{"202604.01":"202605.01.1"}})",
       R"(aksNodeController.json: hotfixes["202604.01"]: value "202605.01.1" is for base "202605.01", not "202604.01")"},
      {kAks, R"({"hotfixes":{"202604.01":1}})",
       R"(aksNodeController.json: hotfixes["202604.01"]: value 1 is a number, not a string)"},
      {kAks, R"({"hotfixes":{"202604.01":null}})",
       R"(aksNodeController.json: hotfixes["202604.01"]: value null is null, not a string)"},
      {kAks, R"({"hotfixes":{},"extra":1})",
       R"(aksNodeController.json: top-level key "extra" is not allowed (only "hotfixes" and "rollouts"))"},
      {kAks, R"({})", R"(aksNodeController.json: missing "hotfixes")"},
      {kAks, R"({"hotfixes":["202604.01.1"]})",
       R"(aksNodeController.json: hotfixes is an array, not an object)"},
      {kAks, R"([])", R"(aksNodeController.json: top level is an array, not an object)"},
      {kAks, R"("hotfixes")", R"(aksNodeController.json: top level is a string, not an object)"},
      {kAks, R"({"hotfixes":{"202604.01":"202604.01.1","202604.01":"202604.01.2"}})",
       R"(aksNodeController.json: duplicate key "202604.01")"},
      // Other components: any object.
      {"other", R"({"anything":[1,{"x":null}]})", nullptr},
      {"other", R"({})", nullptr},
      {"other", R"(42)", R"(other.json: top level is a number, not an object)"},
      {"other", R"({"a":{"b":1,"b":2}})", R"(other.json: duplicate key "b")"},
      // The same key in sibling objects is not a duplicate.
      {"other", R"({"a":{"b":1},"c":{"b":2}})", nullptr},
  };
  for (const ValidationCase& c : cases) {
    Status st = ValidateComponentConfig(c.component, c.json);
    if (c.error == nullptr) {
      EXPECT_TRUE(st.ok()) << c.json << ": " << st.ToString();
    } else {
      EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << c.json;
      EXPECT_EQ(st.message(), c.error) << c.json;
    }
  }
}

TEST(ComponentConfigDigestTest, IsTheFirst12HexDigitsOfTheFilesSha256) {
  // sha256sum of the bytes, as an operator computes it for the file in the ConfigMap.
  auto parsed = ParseComponentConfig("other", R"({"a":1})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->digest, "015abd7f5cc5");
  auto empty = ParseComponentConfig("other", "{}");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->digest, "44136fa355b3");
}

TEST(ValidateComponentConfigTest, InvalidJsonSaysWhere) {
  for (const char* text : {"", "{", R"({"hotfixes":})", "{} x", "{'a':1}", "\xff"}) {
    Status st = ValidateComponentConfig(kAks, text);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << text;
    EXPECT_THAT(st.message(), HasSubstr("aksNodeController.json: invalid JSON: ")) << text;
    EXPECT_THAT(st.message(), HasSubstr("line 1, column")) << text;
    EXPECT_THAT(st.message(), Not(HasSubstr("[json.exception"))) << text;
  }
}

TEST(ValidateComponentConfigTest, LongValuesAreShortenedInMessages) {
  const std::string value(1000, 'y');
  Status st = ValidateComponentConfig(kAks, R"({"hotfixes":{"202604.01":")" + value + "\"}}");
  ASSERT_FALSE(st.ok());
  EXPECT_LT(st.message().size(), 200u) << st.message();
  EXPECT_THAT(st.message(), HasSubstr("..."));
}

}  // namespace
}  // namespace hotfix::service
