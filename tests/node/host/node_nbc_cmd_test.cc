#include "node/host/nbc_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hotfix::node {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using Vars = std::map<std::string, std::string>;

// --- AgentBaker's TestParseEnvVarsFromNBCCmdContent, row by row ---

TEST(NbcCmdTest, SimpleUnquotedVars) {
  Vars got = ParseEnvVarsFromNbcCmd("ADMINUSER=azureuser KUBERNETES_VERSION=1.33.7 MOBY_VERSION=");
  EXPECT_EQ(
      got,
      (Vars{{"ADMINUSER", "azureuser"}, {"KUBERNETES_VERSION", "1.33.7"}, {"MOBY_VERSION", ""}}));
}

TEST(NbcCmdTest, QuotedValues) {
  Vars got = ParseEnvVarsFromNbcCmd(R"(ENABLE_MANAGED_GPU="false" DISABLE_SSH="false")");
  EXPECT_EQ(got, (Vars{{"DISABLE_SSH", "false"}, {"ENABLE_MANAGED_GPU", "false"}}));
}

TEST(NbcCmdTest, UrlValues) {
  const std::string url =
      "https://packages.aks.azure.com/kubernetes/v1.33.7/binaries/"
      "kubernetes-node-linux-amd64.tar.gz";
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("KUBE_BINARY_URL=" + url), (Vars{{"KUBE_BINARY_URL", url}}));
}

TEST(NbcCmdTest, SkipsShellCommands) {
  Vars got = ParseEnvVarsFromNbcCmd(
      R"(echo hello; ADMINUSER=azureuser /usr/bin/nohup /bin/bash -c "script")");
  EXPECT_EQ(got, (Vars{{"ADMINUSER", "azureuser"}}));
  EXPECT_EQ(got.count("echo"), 0u);
}

TEST(NbcCmdTest, HandlesMissingSpaceBetweenAssignments) {
  Vars got =
      ParseEnvVarsFromNbcCmd(R"(KUBELET_CONFIG_FILE_ENABLED="true"PRE_PROVISION_ONLY="false")");
  EXPECT_EQ(got, (Vars{{"KUBELET_CONFIG_FILE_ENABLED", "true"}, {"PRE_PROVISION_ONLY", "false"}}));
}

TEST(NbcCmdTest, SemicolonsAsDelimiters) {
  Vars got = ParseEnvVarsFromNbcCmd(
      R"(PROVISION_OUTPUT="/var/log/azure/cluster-provision-cse-output.log"; echo foo; ADMINUSER=azureuser)");
  EXPECT_EQ(got, (Vars{{"ADMINUSER", "azureuser"},
                       {"PROVISION_OUTPUT", "/var/log/azure/cluster-provision-cse-output.log"}}));
}

TEST(NbcCmdTest, RealNbcCommandSnippet) {
  Vars got = ParseEnvVarsFromNbcCmd(
      R"(PROVISION_OUTPUT="/var/log/azure/cluster-provision-cse-output.log"; echo $(date),$(hostname) > ${PROVISION_OUTPUT}; ADMINUSER=azureuser MOBY_VERSION= TENANT_ID=72f988bf-86f1-41af-91ab-2d7cd011db47 KUBERNETES_VERSION=1.33.7 KUBE_BINARY_URL=https://packages.aks.azure.com/kubernetes/v1.33.7/binaries/kubernetes-node-linux-amd64.tar.gz VM_TYPE=vmss NETWORK_PLUGIN=kubenet ENABLE_MANAGED_GPU="false" GPU_NEEDS_FABRIC_MANAGER="false" CSE_TIMEOUT="900" /usr/bin/nohup /bin/bash -c "/bin/bash /opt/azure/containers/provision_start.sh")");
  EXPECT_EQ(got["PROVISION_OUTPUT"], "/var/log/azure/cluster-provision-cse-output.log");
  EXPECT_EQ(got["ADMINUSER"], "azureuser");
  EXPECT_EQ(got["MOBY_VERSION"], "");
  EXPECT_EQ(got["TENANT_ID"], "72f988bf-86f1-41af-91ab-2d7cd011db47");
  EXPECT_EQ(got["KUBERNETES_VERSION"], "1.33.7");
  EXPECT_EQ(got["VM_TYPE"], "vmss");
  EXPECT_EQ(got["NETWORK_PLUGIN"], "kubenet");
  EXPECT_EQ(got["ENABLE_MANAGED_GPU"], "false");
  EXPECT_EQ(got["GPU_NEEDS_FABRIC_MANAGER"], "false");
  EXPECT_EQ(got["CSE_TIMEOUT"], "900");
  EXPECT_EQ(got.count("KUBE_BINARY_URL"), 1u);
  EXPECT_EQ(got.size(), 11u);  // nothing from $(date), ${...}, nohup or the quoted script
}

TEST(NbcCmdTest, SingleQuotedValuesKeepInnerDoubleQuotes) {
  Vars got = ParseEnvVarsFromNbcCmd(
      R"(PROXY_VARS='export HTTPS_PROXY="https://proxy:8443"; export http_proxy="http://proxy:8080";')");
  EXPECT_EQ(
      got,
      (Vars{
          {"PROXY_VARS",
           R"(export HTTPS_PROXY="https://proxy:8443"; export http_proxy="http://proxy:8080";)"}}));
}

// --- The scanner's consequences (docs/REFERENCE.md, "Inputs") ---

TEST(NbcCmdTest, UnquotedValueEndsWhereAnAssignmentStarts) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("X=abcFOO=bar"), (Vars{{"FOO", "bar"}, {"X", "abc"}}));
}

TEST(NbcCmdTest, UnquotedBase64WithUppercaseBeforePaddingIsTruncated) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("KUBE_CA_CRT=AB="), (Vars{{"AB", ""}, {"KUBE_CA_CRT", ""}}));
  // Quoted, as cse_cmd.sh writes it, the value survives.
  EXPECT_EQ(ParseEnvVarsFromNbcCmd(R"(KUBE_CA_CRT="AB=")"), (Vars{{"KUBE_CA_CRT", "AB="}}));
}

TEST(NbcCmdTest, QuotedAndUnquotedSegmentsConcatenate) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd(R"(K="x"'y'z)"), (Vars{{"K", "xyz"}}));
  EXPECT_EQ(ParseEnvVarsFromNbcCmd(R"(A=x"y z"w)"), (Vars{{"A", "xy zw"}}));
  EXPECT_EQ(ParseEnvVarsFromNbcCmd(R"(A="x"B)"), (Vars{{"A", "xB"}}));
}

TEST(NbcCmdTest, DoesNotEvaluateShell) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("A=$(echo hi)"), (Vars{{"A", "$(echo"}}));
  EXPECT_EQ(ParseEnvVarsFromNbcCmd(R"(A=x\ y)"), (Vars{{"A", "x\\"}}));
}

TEST(NbcCmdTest, BackslashDoesNotEscapeAQuote) {
  // `\"` closes the quote; the final `"` opens an unterminated (empty) one.
  EXPECT_EQ(ParseEnvVarsFromNbcCmd(R"(A="x\"y")"), (Vars{{"A", "x\\y"}}));
}

TEST(NbcCmdTest, ExportTokenIsSkipped) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("export FOO=bar"), (Vars{{"FOO", "bar"}}));
}

TEST(NbcCmdTest, IgnoresLowercaseMixedCaseDigitLeadingAndOptionKeys) {
  EXPECT_THAT(ParseEnvVarsFromNbcCmd("FOO_bar=1"), IsEmpty());
  EXPECT_THAT(ParseEnvVarsFromNbcCmd("foo=1"), IsEmpty());
  EXPECT_THAT(ParseEnvVarsFromNbcCmd("1A=x"), IsEmpty());
  EXPECT_THAT(ParseEnvVarsFromNbcCmd("--opt=K=v"), IsEmpty());
}

TEST(NbcCmdTest, AssignmentInsideAQuotedArgumentIsSkipped) {
  EXPECT_THAT(ParseEnvVarsFromNbcCmd(R"(bash -c "A=1")"), IsEmpty());
  EXPECT_THAT(ParseEnvVarsFromNbcCmd(R"(echo "a; B=2" C=3)"), ElementsAre(Pair("C", "3")));
  EXPECT_THAT(ParseEnvVarsFromNbcCmd(R"(echo 'a B=2' C=3)"), ElementsAre(Pair("C", "3")));
}

TEST(NbcCmdTest, SemicolonWithoutSpaceSeparatesAssignments) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("A=1;B=2"), (Vars{{"A", "1"}, {"B", "2"}}));
}

TEST(NbcCmdTest, TabAndNewlineAreDelimitersButCarriageReturnIsNot) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("A=1\tB=2\nC=3"), (Vars{{"A", "1"}, {"B", "2"}, {"C", "3"}}));
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("A=x\r\nB=y"), (Vars{{"A", "x\r"}, {"B", "y"}}));
}

TEST(NbcCmdTest, LastAssignmentWins) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("A=1 A=2"), (Vars{{"A", "2"}}));
}

TEST(NbcCmdTest, UnterminatedQuoteRunsToEndOfInput) {
  EXPECT_EQ(ParseEnvVarsFromNbcCmd(R"(A="x y; B=2)"), (Vars{{"A", "x y; B=2"}}));
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("A='x y"), (Vars{{"A", "x y"}}));
  EXPECT_THAT(ParseEnvVarsFromNbcCmd(R"(echo "foo A=1)"), IsEmpty());
}

TEST(NbcCmdTest, KeyWithoutEqualsIsSkipped) {
  EXPECT_THAT(ParseEnvVarsFromNbcCmd("ABC"), IsEmpty());
  EXPECT_EQ(ParseEnvVarsFromNbcCmd("ABC DEF=1"), (Vars{{"DEF", "1"}}));
  EXPECT_EQ(ParseEnvVarsFromNbcCmd(R"(ABC"x y" DEF=1)"), (Vars{{"DEF", "1"}}));
}

TEST(NbcCmdTest, EmptyAndDelimiterOnlyInputs) {
  EXPECT_THAT(ParseEnvVarsFromNbcCmd(""), IsEmpty());
  EXPECT_THAT(ParseEnvVarsFromNbcCmd(" ;\t\n"), IsEmpty());
}

TEST(NbcCmdTest, CseCommandShapeFromTheSpec) {
  Vars got = ParseEnvVarsFromNbcCmd(
      R"(PROVISION_OUTPUT="/tmp/out"; API_SERVER_NAME=fallback.example.com KUBE_CA_CRT="Zm9v" /usr/bin/nohup /bin/bash -c "x")");
  EXPECT_EQ(got["API_SERVER_NAME"], "fallback.example.com");
  EXPECT_EQ(got["KUBE_CA_CRT"], "Zm9v");
}

}  // namespace
}  // namespace hotfix::node
