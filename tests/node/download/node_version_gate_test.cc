#include "node/download/version_gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hotfix::node {
namespace {

using ::testing::HasSubstr;

struct GateCase {
  const char* current;
  const char* hotfix;
  bool upgrade;
};

// AgentBaker's ShouldUpgradeToHotfix tests, row by row.
TEST(ShouldUpgradeToHotfix, ReferenceTable) {
  const GateCase cases[] = {
      {"202604.01.0", "202604.01.1", true},    {"202604.01.0", "202604.01.2", true},
      {"202604.01.1", "202604.01.2", true},    {"202604.01.0", "202604.01.1-1", true},
      {"202604.01.0", "202604.01.0", false},   {"202604.01.1", "202604.01.1", false},
      {"202603.15.0", "202604.01.1", false},   {"202605.01.0", "202604.01.1", false},
      {"202604.15.0", "202604.01.1", false},   {"202604.01.2", "202604.01.1", false},
      {"202604.01.1", "202604.01.1-1", false},
  };
  for (const auto& c : cases) {
    StatusOr<bool> got = ShouldUpgradeToHotfix(c.current, c.hotfix);
    ASSERT_TRUE(got.ok()) << c.current << " -> " << c.hotfix << ": " << got.status().message();
    EXPECT_EQ(*got, c.upgrade) << c.current << " -> " << c.hotfix;
  }
}

TEST(ShouldUpgradeToHotfix, UnparseableIsAnError) {
  const std::pair<const char*, const char*> cases[] = {
      {"dev", "202604.01.1"}, {"202604.01.1", "dev"}, {"dev", "dev"},
      {"", "202604.01.1"},    {"202604.01.1", ""},
  };
  for (const auto& [current, hotfix] : cases) {
    StatusOr<bool> got = ShouldUpgradeToHotfix(current, hotfix);
    EXPECT_FALSE(got.ok()) << current << " -> " << hotfix;
  }
  EXPECT_THAT(ShouldUpgradeToHotfix("dev", "202604.01.1").status().message(),
              HasSubstr("parsing current version: version \"dev\""));
  EXPECT_THAT(ShouldUpgradeToHotfix("202604.01.1", "x.y").status().message(),
              HasSubstr("parsing hotfix version"));
}

TEST(ShouldUpgradeToHotfix, TrimsAndComparesNumerically) {
  EXPECT_TRUE(*ShouldUpgradeToHotfix("  202604.01.9\n", "\t202604.1.10 "));
  // Leading zeros are numbers: 01 == 1.
  EXPECT_TRUE(*ShouldUpgradeToHotfix("202604.1.0", "202604.01.1"));
  EXPECT_FALSE(*ShouldUpgradeToHotfix("202604.01.10", "202604.01.9"));
}

TEST(ParseLooseSemver, CoercesLikeMastermindsNewVersion) {
  StatusOr<LooseSemver> v = ParseLooseSemver("v1.02.3-rc.1+build.5");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->major, 1u);
  EXPECT_EQ(v->minor, 2u);
  EXPECT_EQ(v->patch, 3u);
  EXPECT_EQ(v->prerelease, "rc.1");
  EXPECT_EQ(v->metadata, "build.5");

  StatusOr<LooseSemver> short_form = ParseLooseSemver("7");
  ASSERT_TRUE(short_form.ok());
  EXPECT_EQ(short_form->minor, 0u);
  EXPECT_EQ(short_form->patch, 0u);
  StatusOr<LooseSemver> minor_pre = ParseLooseSemver("1.2-3");
  ASSERT_TRUE(minor_pre.ok());
  EXPECT_EQ(minor_pre->patch, 0u);
  EXPECT_EQ(minor_pre->prerelease, "3");
  EXPECT_TRUE(ParseLooseSemver("1.2.3--x").ok());  // '-' is an identifier character
}

TEST(ParseLooseSemver, RefusesWhatTheRegexRefuses) {
  for (const char* bad :
       {"", "v", "V1.2.3", "1.", "1..2", "1.2.3.4", "1.2.3-", "1.2.3+", "1.2.3-a.", "1.2.3-a..b",
        "1.2.3_1", " 1.2.3", "1.2.3 ", "a.b.c", "1.2.3-é", "-1.2.3", "1.2.3-01", "1.2.3-rc.007"}) {
    EXPECT_FALSE(ParseLooseSemver(bad).ok()) << '"' << bad << '"';
  }
  EXPECT_THAT(ParseLooseSemver("1.2.3-01").status().message(), HasSubstr("starts with 0"));
  // Alphanumeric identifiers may start with 0; metadata is not checked for zeros.
  EXPECT_TRUE(ParseLooseSemver("1.2.3-0a").ok());
  EXPECT_TRUE(ParseLooseSemver("1.2.3+007").ok());
  EXPECT_TRUE(ParseLooseSemver("1.2.3-0").ok());
}

TEST(ParseLooseSemver, SegmentsOutOfRangeAreErrors) {
  EXPECT_TRUE(ParseLooseSemver("18446744073709551615.0.0").ok());
  StatusOr<LooseSemver> over = ParseLooseSemver("18446744073709551616.0.0");
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(), HasSubstr("out of range"));
}

}  // namespace
}  // namespace hotfix::node
