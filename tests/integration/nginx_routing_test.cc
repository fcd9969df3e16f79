// hotfix-agent check-hotfix through real nginx (stream + ssl_preread) running
// deploy/nginx/nginx.conf byte for byte, to the real live-patching-service (built with TSan in
// the TSan part of scripts/test.sh). The routing contract itself, for nginx and HAProxy alike,
// is proxy_routing_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nginx.h"
#include "service_fixture.h"
#include "tls_peer.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;

// hotfix-agent --TLS--> nginx (deploy/nginx/nginx.conf) --ALPN--> live-patching-service
TEST(CheckHotfixThroughNginxTest, AnAttestedNodeStagesTheServedPointer) {
  ServiceFiles files;
  files.WriteComponent(kAksNodeControllerComponent, R"({"hotfixes":{"202604.01":"202604.01.3"}})");
  ServiceProcess lps(files.Args());
  TlsPeer apiserver(SilentApiserverOptions(files.tls_ca(), kApiserverFqdn));
  Nginx nginx(LoopbackAddress(lps.port()), LoopbackAddress(apiserver.port()));
  ImdsStandinOptions imds_options;
  imds_options.signer = files.signer();
  ImdsStandin imds(std::move(imds_options));
  NodeAgent node(files.tls_ca());

  AgentRun run = node.CheckHotfix(imds.document_url(), LoopbackAddress(nginx.port()));
  EXPECT_THAT(run.Message(), HasSubstr("check-hotfix outcome=lpsRead"))
      << run.result.stderr_text << "\nnginx:\n"
      << nginx.Log() << "\nservice:\n"
      << lps.Stderr();
  EXPECT_EQ(nlohmann::json::parse(node.dir().Read("hotfix.json"))["hotfixes"],
            nlohmann::json::parse(R"({"202604.01":"202604.01.3"})"));
  EXPECT_EQ(apiserver.accepted_count(), 0u);
}

}  // namespace
}  // namespace hotfix::testsupport
