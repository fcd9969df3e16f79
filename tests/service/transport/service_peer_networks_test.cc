// --proxy-protocol-from's networks: what parses, what is refused and why, and which peers
// they contain (IPv4, IPv6, and IPv4 seen through a dual-stack socket).
#include "service/transport/peer_networks.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

namespace hotfix::service {
namespace {

using ::testing::HasSubstr;

sockaddr_storage Peer(const char* text) {
  sockaddr_storage s{};
  if (auto* in = reinterpret_cast<sockaddr_in*>(&s); inet_pton(AF_INET, text, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    return s;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&s);
  EXPECT_EQ(inet_pton(AF_INET6, text, &in6->sin6_addr), 1) << text;
  in6->sin6_family = AF_INET6;
  return s;
}

TEST(PeerNetworksTest, ContainsWhatItsPrefixesCover) {
  StatusOr<PeerNetworks> n =
      PeerNetworks::Parse({"10.244.0.0/16", "192.0.2.7", "fd00::/8", "172.16.0.0/12"}, "--f");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_TRUE(n->Contains(Peer("10.244.3.4")));
  EXPECT_FALSE(n->Contains(Peer("10.245.0.1")));
  EXPECT_TRUE(n->Contains(Peer("192.0.2.7")));
  EXPECT_FALSE(n->Contains(Peer("192.0.2.8")));
  EXPECT_TRUE(n->Contains(Peer("172.31.255.255")));  // /12: a prefix off a byte boundary
  EXPECT_FALSE(n->Contains(Peer("172.32.0.0")));
  EXPECT_TRUE(n->Contains(Peer("fd12::1")));
  EXPECT_FALSE(n->Contains(Peer("fe80::1")));
  // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d: the IPv4 networks decide.
  EXPECT_TRUE(n->Contains(Peer("::ffff:10.244.9.9")));
  EXPECT_FALSE(n->Contains(Peer("::ffff:10.9.9.9")));
  EXPECT_EQ(n->ToString(), "10.244.0.0/16,192.0.2.7,fd00::/8,172.16.0.0/12");
}

TEST(PeerNetworksTest, EveryAddressOnlyWhenSaid) {
  StatusOr<PeerNetworks> n = PeerNetworks::Parse({"0.0.0.0/0"}, "--f");
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->Contains(Peer("203.0.113.9")));
  EXPECT_FALSE(n->Contains(Peer("2001:db8::1"))) << "an IPv4 network holds no IPv6 peer";
}

TEST(PeerNetworksTest, RefusesWhatIsNotANetworkNamingTheFlagAndEntry) {
  for (const auto& [entry, why] : std::vector<std::pair<std::string, std::string>>{
           {"10.0.0.0/33", "prefix length must be 0 to 32"},
           {"fd00::/129", "prefix length must be 0 to 128"},
           {"10.0.0.0/", "prefix length"},
           {"10.0.0.0/8x", "prefix length"},
           {"10.1.2.3/8", "address bits set past the prefix length"},
           {"example.com/8", "want ADDRESS/BITS"},
           {"", "want ADDRESS/BITS"}}) {
    StatusOr<PeerNetworks> n = PeerNetworks::Parse({entry}, "--proxy-protocol-from");
    ASSERT_FALSE(n.ok()) << entry;
    EXPECT_THAT(n.status().message(), HasSubstr("--proxy-protocol-from \"" + entry + "\""))
        << entry;
    EXPECT_THAT(n.status().message(), HasSubstr(why)) << entry;
  }
  StatusOr<PeerNetworks> none = PeerNetworks::Parse({}, "--proxy-protocol-from");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("at least one network"));
}

}  // namespace
}  // namespace hotfix::service
