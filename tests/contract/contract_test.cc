// contract/live_patching.h against the .proto's own descriptor (full protobuf and the gRPC
// stubs generated from the same file): the names spelled in the header are the proto's, and
// every outcome the proto defines has its name, label and failure verdict.

#include "contract/live_patching.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "akslivepatching/v1/live_patching.grpc.pb.h"

namespace hotfix::contract {
namespace {

const google::protobuf::ServiceDescriptor& Service() {
  const google::protobuf::ServiceDescriptor* service =
      akslivepatching::v1::GetComponentConfigRequest::descriptor()->file()->FindServiceByName(
          "LivePatchingService");
  EXPECT_NE(service, nullptr);
  return *service;
}

TEST(ContractTest, TheNamesAreTheProtos) {
  EXPECT_EQ(kServiceName, Service().full_name());
  EXPECT_STREQ(kServiceName, akslivepatching::v1::LivePatchingService::service_full_name());
  std::set<std::string> paths;
  for (int i = 0; i < Service().method_count(); ++i) {
    paths.insert("/" + Service().full_name() + "/" + Service().method(i)->name());
  }
  EXPECT_EQ(paths, (std::set<std::string>{kGetComponentConfigPath, kReportHotfixOutcomePath}));
}

TEST(ContractTest, EveryOutcomeButUnspecifiedIsReportedWithTheProtosName) {
  const google::protobuf::EnumDescriptor* outcomes =
      akslivepatching::v1::HotfixOutcome_descriptor();
  int reported = 0;
  for (int i = 0; i < outcomes->value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor* value = outcomes->value(i);
    if (value->number() == HOTFIX_OUTCOME_UNSPECIFIED) {
      EXPECT_FALSE(IsReportedOutcome(value->number()));
      continue;
    }
    ++reported;
    const Outcome outcome = static_cast<Outcome>(value->number());
    EXPECT_TRUE(IsReportedOutcome(value->number())) << value->name();
    EXPECT_EQ("HOTFIX_OUTCOME_" + OutcomeName(outcome), value->name());
    EXPECT_EQ(OutcomeFromLabel(OutcomeLabel(outcome)), outcome) << value->name();
    EXPECT_GE(value->number(), kFirstReportedOutcome);
    EXPECT_LE(value->number(), kLastReportedOutcome);
  }
  EXPECT_EQ(reported, 8);
  EXPECT_EQ(OutcomeLabel(HOTFIX_OUTCOME_PLATFORM_UNSUPPORTED), "platform_unsupported");
  EXPECT_FALSE(IsReportedOutcome(kLastReportedOutcome + 1));
  EXPECT_FALSE(IsReportedOutcome(-1));
  EXPECT_EQ(OutcomeFromLabel("INSTALLED"), std::nullopt);  // labels are lower case
  EXPECT_EQ(OutcomeFromLabel("unspecified"), std::nullopt);
}

TEST(ContractTest, OnlyInstalledAndProvisionSucceededAreNotFailures) {
  for (int value = kFirstReportedOutcome; value <= kLastReportedOutcome; ++value) {
    const Outcome outcome = static_cast<Outcome>(value);
    EXPECT_EQ(IsFailure(outcome),
              outcome != HOTFIX_OUTCOME_INSTALLED && outcome != HOTFIX_OUTCOME_PROVISION_SUCCEEDED)
        << OutcomeName(outcome);
  }
  EXPECT_TRUE(IsFailure(HOTFIX_OUTCOME_INSTALL_FAILED));
  EXPECT_FALSE(IsFailure(HOTFIX_OUTCOME_INSTALLED));
}

}  // namespace
}  // namespace hotfix::contract
