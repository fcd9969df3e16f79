#include "haproxy.h"

#include <cstdlib>
#include <stdexcept>

#include "ports.h"
#include "subprocess.h"

#ifndef LP_DEFAULT_SOURCE_DIR
#define LP_DEFAULT_SOURCE_DIR "."
#endif

namespace hotfix::testsupport {
namespace {

constexpr int kBindAttempts = 3;

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

bool LostBindRace(const std::string& output) {
  return output.find("cannot bind socket") != std::string::npos ||
         output.find("Address already in use") != std::string::npos;
}

}  // namespace

std::filesystem::path Haproxy::DefaultConfigPath() {
  return std::filesystem::path(EnvOr("LP_SOURCE_DIR", LP_DEFAULT_SOURCE_DIR)) / "deploy" /
         "haproxy" / "haproxy.cfg";
}

std::string Haproxy::DefaultBinary() { return EnvOr("LP_HAPROXY_BIN", "haproxy"); }

Haproxy::Haproxy(HaproxyOptions options) {
  if (options.config_path.empty()) options.config_path = DefaultConfigPath();
  if (options.binary.empty()) options.binary = DefaultBinary();
  std::string failure;
  int attempts = options.frontend_port == 0 ? kBindAttempts : 1;
  for (int i = 0; i < attempts; ++i) {
    uint16_t port = options.frontend_port ? options.frontend_port : PickFreePort();
    if (TryStart(options, port, &failure)) return;
    if (!LostBindRace(failure)) break;
  }
  throw std::runtime_error("HAProxy did not start: " + failure);
}

Haproxy::~Haproxy() { Stop(); }

bool Haproxy::TryStart(const HaproxyOptions& options, uint16_t port, std::string* failure) {
  SpawnOptions spawn;
  // -db: stay in the foreground, no daemon, so the test owns the process and its output.
  spawn.argv = {options.binary, "-db", "-f", options.config_path.string()};
  spawn.env = {{"LP_FRONTEND_BIND", LoopbackAddress(port)},
               {"LP_SERVICE_ADDR", options.service_addr},
               {"LP_APISERVER_ADDR", options.apiserver_addr}};
  if (options.send_proxy_v2) {
    spawn.unset_env = {"LP_NO_PROXY_PROTOCOL"};
  } else {
    spawn.env["LP_NO_PROXY_PROTOCOL"] = "1";
  }
  process_ = std::make_unique<Subprocess>(std::move(spawn));
  bool up = WaitUntilListening(port, options.start_timeout, [this] { return process_->running(); });
  if (up && process_->running()) {
    frontend_port_ = port;
    return true;
  }
  ExitStatus status = process_->Stop();
  *failure = status.ToString() + "; output:\n" + process_->Stdout() + process_->Stderr();
  process_.reset();
  return false;
}

std::string Haproxy::frontend_address() const { return LoopbackAddress(frontend_port_); }

bool Haproxy::running() const { return process_ && process_->running(); }

std::string Haproxy::Log() const {
  return process_ ? process_->Stdout() + process_->Stderr() : std::string();
}

void Haproxy::Stop() {
  if (process_) process_->Stop();
}

HaproxyOptions AlpnRouteOptions(uint16_t service_port, uint16_t apiserver_port) {
  HaproxyOptions options;
  options.service_addr = LoopbackAddress(service_port);
  options.apiserver_addr = LoopbackAddress(apiserver_port);
  return options;
}

}  // namespace hotfix::testsupport
