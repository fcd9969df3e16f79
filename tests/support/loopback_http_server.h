// A real HTTP/1.1 server (cpp-httplib) on 127.0.0.1 answering GET on one path, each test
// scripting the answer and reading what the request carried. Header-only: only the tests
// that link cpp-httplib (the wire and node HTTP clients' tests) include it.
//
//   LoopbackHttpServer server("/api/v1/query");
//   server.handler = [](const httplib::Request&, httplib::Response& res) { res.status = 503; };
//   ... GET server.Url("?query=up") ...;  server.requests, server.last.headers
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace hotfix::testsupport {

class LoopbackHttpServer {
 public:
  std::function<void(const httplib::Request&, httplib::Response&)> handler;
  std::atomic<int> requests{0};
  httplib::Request last;  // the latest request (written on the server's thread)

  explicit LoopbackHttpServer(std::string path) : path_(std::move(path)) {
    server_.Get(path_, [this](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      last = req;
      handler(req, res);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackHttpServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  // http://127.0.0.1:<port><path><query>
  std::string Url(const std::string& query = "") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path_ + query;
  }

 private:
  std::string path_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace hotfix::testsupport
