#include "common/duration.h"

#include <gtest/gtest.h>

namespace hotfix {
namespace {

using std::chrono::milliseconds;

long long Ms(std::string_view text) {
  auto d = ParseDuration(text);
  EXPECT_TRUE(d.ok()) << text << ": " << d.status().message();
  return d.ok() ? d->count() : -1;
}

TEST(DurationTest, EveryUnitAndSums) {
  EXPECT_EQ(Ms("250ms"), 250);
  EXPECT_EQ(Ms("3s"), 3000);
  EXPECT_EQ(Ms("90s"), 90000);
  EXPECT_EQ(Ms("30m"), 30 * 60000);
  EXPECT_EQ(Ms("6h"), 6 * 3600000LL);
  EXPECT_EQ(Ms("1d"), 86400000);
  EXPECT_EQ(Ms("1h30m"), 5400000);
  EXPECT_EQ(Ms("1m30s500ms"), 90500);
  EXPECT_EQ(Ms("0"), 0);
  EXPECT_EQ(Ms("0s"), 0);
  EXPECT_EQ(Ms("3650d"), 3650LL * 86400000);
}

TEST(DurationTest, RefusesWhatIsNotOneOfThem) {
  for (std::string_view bad : {"", "5", "s", "5x", "-5s", "1.5h", "5 s", " 5s", "5S", "5M", "1h30",
                               "5mss", "3651d", "999999999999999s", "1000000000000ms", "0x10s"}) {
    auto d = ParseDuration(bad);
    EXPECT_FALSE(d.ok()) << "\"" << bad << "\" parsed as " << (d.ok() ? d->count() : 0) << " ms";
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), Status::Code::kInvalidArgument);
    }
  }
  EXPECT_NE(ParseDuration("5x").status().message().find("duration \"5x\""), std::string::npos);
}

TEST(DurationTest, WithinARange) {
  EXPECT_EQ(ParseDurationWithin("2s", milliseconds(1000), milliseconds(3000)).value().count(),
            2000);
  auto over = ParseDurationWithin("2h", milliseconds(0), std::chrono::minutes(10));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(), "duration \"2h\": want 0s to 10m");
  EXPECT_FALSE(ParseDurationWithin("500ms", std::chrono::seconds(1), std::chrono::hours(1)).ok());
}

TEST(DurationTest, FormatsWhatItParses) {
  for (long long ms : {0LL, 1LL, 250LL, 1000LL, 90000LL, 5400000LL, 86400000LL, 90061001LL}) {
    const std::string text = FormatDuration(milliseconds(ms));
    EXPECT_EQ(Ms(text), ms) << text;
  }
  EXPECT_EQ(FormatDuration(milliseconds(5400000)), "1h30m");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
}

}  // namespace
}  // namespace hotfix
