// The allow-list of subscriptions (src/service/identity/subscription_allow_list.h): the file's
// syntax, what it refuses, and a reload that keeps the previous list when the new file is bad.

#include "service/identity/subscription_allow_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"
#include "temp_dir.h"

namespace hotfix::service {
namespace {

using ::testing::HasSubstr;
using testsupport::TempDir;

constexpr char kA[] = "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8";
constexpr char kB[] = "8d10da13-8125-4ba9-a717-bf7490507b3d";

// The pieces one after another. (Appending, not `std::string(a) + b + c`: GCC 12's -Wrestrict
// flags that chain of temporaries falsely, GCC bug 105329.)
std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

TEST(SubscriptionAllowListTest, ParsesCommasSpacesLinesAndCommentsAnyCase) {
  auto ids = SubscriptionAllowList::Parse(
      Cat({"# the fleet\n8ECADFC9-D1A3-4EA4-B844-0D9F87E4D7C8, ", kB, "  # prod\n\n", kA, "\r\n"}));
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::set<std::string>{kA, kB}));
}

TEST(SubscriptionAllowListTest, RefusesWhatIsNotAListOfSubscriptions) {
  // Empty, or comments only: never "everyone".
  for (const char* empty : {"", "\n", "# nobody yet\n", " , ,"}) {
    auto r = SubscriptionAllowList::Parse(empty);
    ASSERT_FALSE(r.ok()) << empty;
    EXPECT_THAT(r.status().message(), HasSubstr("no subscription ID"));
  }
  auto typo = SubscriptionAllowList::Parse(Cat({kA, "\n8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c\n"}));
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(
      typo.status().message(),
      HasSubstr("line 2: \"8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c\" is not a subscription ID"));
  auto control = SubscriptionAllowList::Parse(std::string("x\x01y"));
  ASSERT_FALSE(control.ok());
  EXPECT_THAT(control.status().message(), HasSubstr("\"x\\x01y\""));
  EXPECT_FALSE(SubscriptionAllowList::Parse(std::string(kMaxAllowListBytes + 1, ' ')).ok());
}

TEST(SubscriptionAllowListTest, FixedFromTheFlagAndEmptyAllowsAny) {
  auto any = SubscriptionAllowList::Fixed({});
  EXPECT_TRUE(any->Allows(kA));
  EXPECT_EQ(any->size(), 0u);
  auto one = SubscriptionAllowList::Fixed({"8ECADFC9-D1A3-4EA4-B844-0D9F87E4D7C8"});
  EXPECT_TRUE(one->Allows(kA));
  EXPECT_FALSE(one->Allows(kB));
  EXPECT_FALSE(one->from_file());
}

TEST(SubscriptionAllowListTest, AChangedFileIsReadAgainAndABadOneKeepsTheListBefore) {
  TempDir dir("allow-list");
  const std::string path = dir.Write("allowed", Cat({kA, "\n"})).string();
  auto list = SubscriptionAllowList::Load(path);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE((*list)->Allows(kA));
  EXPECT_FALSE((*list)->Allows(kB));
  unittest::CapturedLog log;
  (*list)->ReloadIfChanged(&log.logger());  // unchanged: nothing
  EXPECT_TRUE(log.Messages().empty());

  dir.Write("allowed", Cat({kA, ",", kB, "\n"}));
  (*list)->ReloadIfChanged(&log.logger());
  EXPECT_TRUE((*list)->Allows(kB));
  EXPECT_EQ((*list)->size(), 2u);
  EXPECT_TRUE((*list)->last_reload_successful());

  dir.Write("allowed", "# emptied by mistake\n");
  (*list)->ReloadIfChanged(&log.logger());
  EXPECT_FALSE((*list)->last_reload_successful());
  EXPECT_TRUE((*list)->Allows(kB)) << "the list before stays";
  EXPECT_FALSE((*list)->Allows("00000000-0000-0000-0000-000000000000"));
  bool logged = false;
  for (const std::string& m : log.Messages()) {
    logged = logged || m == "allowed subscriptions changed but do not load; still allowing the "
                            "previous list";
  }
  EXPECT_TRUE(logged);

  auto missing = SubscriptionAllowList::Load(dir.File("absent").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--allowed-subscriptions-file"));
}

}  // namespace
}  // namespace hotfix::service
