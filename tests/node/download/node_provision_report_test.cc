// `hotfix-agent report` (src/node/download/provision_report.h): a node that provisioned with its
// hotfix binary reports PROVISION_SUCCEEDED or PROVISION_FAILED for the version its pointer names,
// once per (base, version, outcome) by a marker of its own; a node that provisioned with its VHD
// binary, or whose pointer names nothing for it, reports nothing.
#include "node/download/provision_report.h"

#include <sys/stat.h>

#include <filesystem>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"
#include "temp_dir.h"

namespace hotfix::node {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using testsupport::TempDir;
using unittest::CapturedLog;

class FakeSender : public HotfixReportSender {
 public:
  Status Send(const HotfixReport& report, Deadline) override {
    sent.push_back(report);
    return Status::Ok();
  }
  std::vector<HotfixReport> sent;
};

class ProvisionReportTest : public ::testing::Test {
 protected:
  ProvisionReportTest() {
    opt_.Write("aks-node-controller-hotfix.json",
               R"({"hotfixes":{"202604.01":"202604.01.4","202605.30":"202605.30.1"}})");
    std::filesystem::path bin = opt_.Write("aks-node-controller-hotfix", "#!/bin/sh\n");
    ::chmod(bin.c_str(), 0755);
    input_.pointer_path = opt_.File("aks-node-controller-hotfix.json");
    input_.current_version = "202604.01.2";
    input_.hotfix_binary = bin;
    options_.marker_path = ProvisionReportMarkerPath(input_.pointer_path);
  }
  ReportStatus Run() { return RunReportCommand(input_, options_, sender_, log_.logger()); }

  TempDir opt_{"opt"};
  ProvisionReportInput input_;
  ReportHotfixOptions options_;
  FakeSender sender_;
  CapturedLog log_;
};

TEST_F(ProvisionReportTest, ASucceededProvisionIsReportedOnceForThePointersVersion) {
  input_.succeeded = true;
  EXPECT_EQ(Run(), ReportStatus::kSent);
  ASSERT_EQ(sender_.sent.size(), 1u);
  EXPECT_EQ(sender_.sent[0].outcome, contract::HOTFIX_OUTCOME_PROVISION_SUCCEEDED);
  EXPECT_EQ(sender_.sent[0].base_version, "202604.01");
  EXPECT_EQ(sender_.sent[0].hotfix_version, "202604.01.4");
  EXPECT_EQ(sender_.sent[0].detail, "");
  EXPECT_EQ(Run(), ReportStatus::kAlreadyReported);
  EXPECT_EQ(sender_.sent.size(), 1u);
  // Its own marker: the install report's is untouched.
  EXPECT_THAT(opt_.Names(),
              UnorderedElementsAre("aks-node-controller-hotfix.json", "aks-node-controller-hotfix",
                                   kProvisionReportMarkerName));
  EXPECT_THAT(opt_.Read(kProvisionReportMarkerName), HasSubstr("PROVISION_SUCCEEDED"));
}

TEST_F(ProvisionReportTest, AFailedProvisionCarriesItsDetailBounded) {
  input_.succeeded = false;
  input_.detail = "provision exited 1\n" + std::string(400, 'x');
  EXPECT_EQ(Run(), ReportStatus::kSent);
  ASSERT_EQ(sender_.sent.size(), 1u);
  EXPECT_EQ(sender_.sent[0].outcome, contract::HOTFIX_OUTCOME_PROVISION_FAILED);
  EXPECT_LE(sender_.sent[0].detail.size(), kMaxReportDetailBytes);
  EXPECT_THAT(sender_.sent[0].detail, HasSubstr("provision exited 1\\x0a"));
  EXPECT_EQ(contract::OutcomeName(contract::HOTFIX_OUTCOME_PROVISION_FAILED), "PROVISION_FAILED");
}

TEST_F(ProvisionReportTest, TheVhdBinaryProvisionedSoNothingIsReported) {
  ::chmod(input_.hotfix_binary.c_str(), 0644);  // not executable: the flow chose the VHD's
  EXPECT_EQ(Run(), ReportStatus::kNothingToReport);
  std::filesystem::remove(input_.hotfix_binary);
  EXPECT_EQ(Run(), ReportStatus::kNothingToReport);
  EXPECT_TRUE(sender_.sent.empty());
  EXPECT_THAT(log_.Messages(),
              Contains("provisioning outcome not reported to LPS: nothing to report"));
}

TEST_F(ProvisionReportTest, APointerWithoutThisBaseOrUnreadableReportsNothing) {
  input_.current_version = "202609.15.0";
  EXPECT_EQ(Run(), ReportStatus::kNothingToReport);
  opt_.Write("aks-node-controller-hotfix.json", "{not json");
  input_.current_version = "202604.01.2";
  EXPECT_EQ(Run(), ReportStatus::kNothingToReport);
  EXPECT_TRUE(sender_.sent.empty());
}

}  // namespace
}  // namespace hotfix::node
