// ProxiedLps: the endpoint a node dials, as AKS runs it. The real HAProxy with
// deploy/haproxy/haproxy.cfg routes ALPN aks-live-patching to a HelloTap in front of a
// FakeLpsServer, and everything else to a silent "apiserver" TlsPeer. Every part is
// listening when the constructor returns.
//
//   ProxiedLps stack(ca, "myaks-dns-12345678.hcp.eastus.azmk8s.io");
//   stack.lps.SetConfig(...);   ... dial stack.proxy.frontend_address() ...
//   stack.tap.connections()[0].hello.alpn;   stack.apiserver.accepted_count();
#pragma once

#include <string>

#include "fake_lps_server.h"
#include "haproxy.h"
#include "hello_tap.h"
#include "test_certs.h"
#include "tls_peer.h"

namespace hotfix::testsupport {

// What the proxy routes to: the fake service behind a HelloTap, and a silent apiserver. For a
// test that puts its own proxy in front (proxy_routing_test runs HAProxy and nginx).
struct LpsBackends {
  LpsBackends(const TestCa& ca, const std::string& apiserver_fqdn)
      : lps(LpsServerOptions(ca)),
        tap("127.0.0.1", lps.port()),
        apiserver(SilentApiserverOptions(ca, apiserver_fqdn)) {}

  // Declared in start order (members are built in this order).
  FakeLpsServer lps;
  HelloTap tap;
  TlsPeer apiserver;
};

// The backends behind HAProxy, started last.
struct ProxiedLps : LpsBackends {
  ProxiedLps(const TestCa& ca, const std::string& apiserver_fqdn)
      : LpsBackends(ca, apiserver_fqdn), proxy(AlpnRouteOptions(tap.port(), apiserver.port())) {}

  Haproxy proxy;
};

}  // namespace hotfix::testsupport
