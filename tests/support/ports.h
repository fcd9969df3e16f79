// Loopback ports for fixtures that cannot bind port 0 themselves (HAProxy, subprocesses).
// In-process servers here bind 127.0.0.1:0 directly and report their port, which is race
// free; prefer that whenever a component can do it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace hotfix::testsupport {

// Binds 127.0.0.1:0, reads the port the kernel chose, closes. Never hands out the same port
// twice in one process and skips ports something already listens on. Another process can
// still take the port before the caller binds it: callers that spawn servers retry on a
// bind failure (see Haproxy).
uint16_t PickFreePort();

// "127.0.0.1:<port>"
std::string LoopbackAddress(uint16_t port);

// An IPv4 address of this machine that is not loopback (the first interface that is up and has
// one), "" if there is none: a destination a proxy-aware client does not treat as local, as it
// treats every loopback address (Go's httpproxy never proxies them).
std::string NonLoopbackIpv4();

struct ListenAddress {
  std::string host;
  uint16_t port = 0;  // 0: any free port
};
// A tool's --listen value, "host:port" or "[v6]:port" (common/host_port.h's SplitHostPort);
// port 0 asks for any free port. Throws std::runtime_error naming the value otherwise.
ListenAddress ParseListenAddress(std::string_view text);

// A plain TCP connection to 127.0.0.1:port (e.g. to send non-TLS bytes or hold a
// connection open); -1 with errno on failure. The caller closes it.
int ConnectLoopback(uint16_t port);

// True if a TCP socket on any local address is in LISTEN state on this port. Reads
// /proc/net/tcp and /proc/net/tcp6 instead of connecting, so readiness probes never show
// up as connections at the server under test.
bool IsListening(uint16_t port);

// Polls IsListening() until true or the timeout; gives up early when still_alive (if given)
// returns false, e.g. because the server process exited.
bool WaitUntilListening(uint16_t port, std::chrono::milliseconds timeout,
                        const std::function<bool()>& still_alive = {});

}  // namespace hotfix::testsupport
