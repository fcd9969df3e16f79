// ListenTcp: the listeners every port of the service uses. What the event loop relies on
// without checking per connection: an accepted socket already has TCP_NODELAY (the kernel
// copies it from the listener), and a busy port is refused rather than shared.
#include "service/transport/listen_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "socket_util.h"

namespace hotfix::service {
namespace {

using ::testing::HasSubstr;

// Not net::ConnectTcp: it sets TCP_NODELAY on the dialer, whose socket must stay untouched here.
UniqueFd Dial(uint16_t port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  return fd;
}

// The next connection on a non-blocking listener, once it has come.
UniqueFd AcceptOne(int listener) {
  EXPECT_TRUE(testsupport::net::WaitReadable(listener, std::chrono::seconds(30)));
  return UniqueFd(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

int NoDelay(int fd) {
  int value = -1;
  socklen_t len = sizeof value;
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &len), 0);
  return value;
}

TEST(ListenTcpTest, AcceptedConnectionsStartWithNoDelay) {
  uint16_t port = 0;
  StatusOr<UniqueFd> listener = ListenTcp("127.0.0.1:0", "--listen", &port);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  ASSERT_NE(port, 0);
  EXPECT_EQ(NoDelay(listener->get()), 1);
  for (int i = 0; i < 3; ++i) {
    UniqueFd client = Dial(port);
    UniqueFd accepted = AcceptOne(listener->get());
    ASSERT_GE(accepted.get(), 0);
    EXPECT_NE(NoDelay(accepted.get()), 0) << "connection " << i;
    EXPECT_EQ(NoDelay(client.get()), 0) << "the dialer's own socket is untouched";
  }
}

TEST(ListenTcpTest, ABusyPortIsRefusedNotShared) {
  uint16_t port = 0;
  StatusOr<UniqueFd> first = ListenTcp("127.0.0.1:0", "--listen", &port);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  uint16_t again = 0;
  StatusOr<UniqueFd> second =
      ListenTcp("127.0.0.1:" + std::to_string(port), "--health-listen", &again);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("--health-listen 127.0.0.1:"));
  EXPECT_THAT(second.status().message(), HasSubstr("cannot listen there"));
}

TEST(ListenTcpTest, AnAddressWithoutAPortIsRefused) {
  uint16_t port = 0;
  StatusOr<UniqueFd> listener = ListenTcp("127.0.0.1", "--listen", &port);
  ASSERT_FALSE(listener.ok());
  EXPECT_THAT(listener.status().message(), HasSubstr("want ADDR:PORT"));
}

}  // namespace
}  // namespace hotfix::service
