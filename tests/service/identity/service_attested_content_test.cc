// ParseAttestedContent: IMDS's JSON read from nlohmann's SAX events. The cases a reader of
// events can get wrong and a DOM could not: a member repeated (the last one counts, whatever
// its type), the same names deeper down (not the document's), and a document that is not an
// object or not JSON to its end. The fuzzer compares every input with the DOM reading
// (tests/fuzz/attested_document_fuzz.cc).
#include "service/identity/attested_content.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace hotfix::service {
namespace {

using ::testing::HasSubstr;

constexpr char kStamps[] =
    R"("timeStamp":{"createdOn":"12/02/26 09:00:00 -0000","expiresOn":"12/02/26 15:00:00 -0000"})";

// The pieces one after another (appended: GCC 12's -Warray-bounds misfires on a chain of
// operator+ over literals, its bug 105329).
std::string Cat(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view piece : pieces) out.append(piece);
  return out;
}

std::string Document(const std::string& members) {
  return Cat({R"({"subscriptionId":"sub-1",)", kStamps, ",", members, "}"});
}

std::string ErrorOf(const std::string& json) {
  StatusOr<AttestedContent> content = ParseAttestedContent(json);
  EXPECT_FALSE(content.ok()) << json;
  return content.ok() ? "" : content.status().message();
}

TEST(AttestedContentTest, ReadsIMDSsDocument) {
  StatusOr<AttestedContent> content = ParseAttestedContent(
      Cat({R"({"licenseType":"","nonce":"n","plan":{"name":"","product":"","publisher":""},)"
           R"("sku":"aks-ubuntu","subscriptionId":"sub-1",)",
           kStamps, R"(,"vmId":"vm-1"})"}));
  ASSERT_TRUE(content.ok()) << content.status().ToString();
  EXPECT_EQ(content->identity.vm_id, "vm-1");
  EXPECT_EQ(content->identity.subscription_id, "sub-1");
  EXPECT_EQ(content->identity.sku, "aks-ubuntu");
  EXPECT_EQ(content->identity.expires_at - content->created_on, std::chrono::hours(6));
  EXPECT_EQ(FormatUtc(content->created_on), "2026-12-02T09:00:00Z");
}

TEST(AttestedContentTest, ARepeatedMemberCountsItsLastValue) {
  StatusOr<AttestedContent> content = ParseAttestedContent(Document(R"("vmId":"a","vmId":"b")"));
  ASSERT_TRUE(content.ok()) << content.status().ToString();
  EXPECT_EQ(content->identity.vm_id, "b");
  EXPECT_THAT(ErrorOf(Document(R"("vmId":"a","vmId":7)")), HasSubstr("no vmId string"));
  EXPECT_THAT(ErrorOf(Document(R"("vmId":"a","vmId":["b"])")), HasSubstr("no vmId string"));
  EXPECT_THAT(ErrorOf(Document(R"("vmId":"a","vmId":{"vmId":"b"})")), HasSubstr("no vmId string"));
  EXPECT_THAT(ErrorOf(Document(R"("vmId":"a","vmId":"")")), HasSubstr("no vmId string"));
  // A second timeStamp replaces the first whole, members and all.
  EXPECT_THAT(
      ErrorOf(Document(R"("vmId":"a","timeStamp":{"createdOn":"12/02/26 09:00:00 -0000"})")),
      HasSubstr("timeStamp.createdOn/expiresOn missing"));
  EXPECT_THAT(ErrorOf(Document(R"("vmId":"a","timeStamp":"now")")),
              HasSubstr("timeStamp.createdOn/expiresOn missing"));
}

TEST(AttestedContentTest, NamesDeeperDownAreNotTheDocuments) {
  EXPECT_THAT(ErrorOf(Cat({R"({"subscriptionId":"s",)", kStamps,
                           R"(,"plan":{"vmId":"v"},"list":[{"vmId":"w"}]})"})),
              HasSubstr("no vmId string"));
  // createdOn outside timeStamp, and timeStamp inside another member, count for nothing.
  EXPECT_THAT(ErrorOf(R"({"vmId":"v","subscriptionId":"s","createdOn":"12/02/26 09:00:00 -0000",)"
                      R"("plan":{"timeStamp":{"createdOn":"12/02/26 09:00:00 -0000",)"
                      R"("expiresOn":"12/02/26 15:00:00 -0000"}}})"),
              HasSubstr("timeStamp.createdOn/expiresOn missing"));
  // Inside timeStamp, a deeper createdOn is not timeStamp's own.
  EXPECT_THAT(ErrorOf(R"({"vmId":"v","subscriptionId":"s","timeStamp":{"x":{"createdOn":)"
                      R"("12/02/26 09:00:00 -0000"},"expiresOn":"12/02/26 15:00:00 -0000"}})"),
              HasSubstr("timeStamp.createdOn/expiresOn missing"));
  // A member after timeStamp's object is the document's again.
  StatusOr<AttestedContent> content =
      ParseAttestedContent(Cat({R"({"subscriptionId":"s",)", kStamps, R"(,"vmId":"after"})"}));
  ASSERT_TRUE(content.ok()) << content.status().ToString();
  EXPECT_EQ(content->identity.vm_id, "after");
}

TEST(AttestedContentTest, OnlyAWholeJSONObjectIsADocument) {
  for (const char* json : {"", "[]", R"(["vmId"])", R"("vmId")", "7", "null", R"({"vmId":"v"} {})",
                           R"({"vmId":"v",})", R"({"vmId":"v")"}) {
    EXPECT_EQ(ErrorOf(json), "attested document content: not a JSON object") << json;
  }
}

}  // namespace
}  // namespace hotfix::service
