// live-patching-service: the gRPC service nodes reach through the kube-api-proxy's ALPN route. A
// thin main: flags in, Server out, signals to it. See docs/SERVICE.md.
//
// `live-patching-service validate | plan | simulate | rollout` are the operator's tools for
// staged rollouts (docs/ROLLOUTS.md): here only their flags; each is one call into
// src/service/control/operator_tools.h.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "build_info.h"
#include "common/duration.h"
#include "common/file_util.h"
#include "common/log.h"
#include "service/control/fleet.h"
#include "service/control/operator_tools.h"
#include "service/control/simulate.h"
#include "service/identity/rate_limiter.h"
#include "service/rollout/rollout.h"
#include "service/server.h"
#include "service/store/component_store.h"
#include "service/transport/connection_memory.h"
#include "service/transport/memory_budget.h"

namespace {

namespace svc = hotfix::service;
using std::chrono::milliseconds;

// ---- the operator's tools: their flags, then service/control/operator_tools.h --------------

// Parses a tool's flags (argv[0] is the tool's name); nullopt when parsing succeeded, else
// the exit status (0 for --help).
std::optional<int> ParseTool(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? svc::kToolOk : svc::kToolUsage;
  }
  return std::nullopt;
}

int RunValidate(int argc, char** argv) {
  CLI::App app{
      "Loads every <component>.json of a folder exactly as the service would, and prints one "
      "line per refused file (file, rollout, field and why), then \"N files ok, M refused\". "
      "Never serves. What a config repository's CI runs.",
      "live-patching-service validate"};
  app.footer(svc::kToolExitCodes);
  svc::ValidateToolOptions o;
  app.add_option("--components-dir", o.components_dir, "folder of <component>.json files")
      ->required();
  if (auto code = ParseTool(app, argc, argv)) return *code;
  return svc::RunValidateTool(o, std::cout, std::cerr);
}

int RunPlan(int argc, char** argv) {
  CLI::App app{
      "Says what one node is served by a component's file at one time, as JSON: the served "
      "config, and for each rollout whether it applies and why not (halted, the match field "
      "that failed, or \"bucket B not under threshold T\"), its bucket, threshold, percent, "
      "state and enters_at (the first step time at which this node is in; null if never under "
      "the file as it stands). Never serves.",
      "live-patching-service plan"};
  app.footer(svc::kToolExitCodes);
  svc::PlanToolOptions o;
  app.add_option("--components-dir", o.components_dir, "folder of <component>.json files")
      ->required();
  app.add_option("--component", o.component, "the component, e.g. aksNodeController")->required();
  app.add_option("--vm-id", o.vm_id, "the node's vmId (\"\" for a node without one)")->required();
  app.add_option("--subscription", o.subscription, "the node's subscriptionId")->required();
  app.add_option("--cluster", o.cluster,
                 "the apiserver host the node dials (:authority; a :port is removed)")
      ->required();
  app.add_option("--at", o.at, "RFC 3339 UTC time, e.g. 2026-12-04T06:00:00Z (default: now)");
  if (auto code = ParseTool(app, argc, argv)) return *code;
  return svc::RunPlanTool(o, std::cout, std::cerr);
}

int RunSimulate(int argc, char** argv) {
  CLI::App app{
      "Counts how many nodes of a fleet are served each version of each base at each time "
      "from --from to --to, every --every; with --against, also the nodes whose answer "
      "differs between the two folders (a rename that re-buckets the fleet shows here before "
      "it ships). Never serves.",
      "live-patching-service simulate"};
  app.footer(
      std::string("Output (tab-separated, one header line per block, blocks separated by a "
                  "blank line):\n"
                  "  at<TAB><version>...   one column per version the file names, sorted, and "
                  "<base>:none for a base the top-level map lacks; one row per time\n"
                  "  with --against:\n"
                  "  at<TAB>differing<TAB>listed_at   nodes whose answer differs, and the time "
                  "whose lines list them (a run of times with the same answers is listed once)\n"
                  "  at<TAB>vm_id<TAB>subscription<TAB>cluster<TAB>served<TAB>served_against   "
                  "the first ") +
      std::to_string(svc::kMaxDiffNodesListed) +
      " differing nodes per listed time\n"
      "A node file has lines vmId,subscriptionId,clusterHost (# comments and blank lines "
      "ignored; repeated nodes counted once). Limits: " +
      std::to_string(svc::kMaxFleetNodes) + " nodes, " + std::to_string(svc::kMaxSimulateTimes) +
      " times.\n" + svc::kToolExitCodes);
  svc::SimulateToolOptions o;
  uint64_t random_count = 0;
  app.add_option("--components-dir", o.components_dir, "folder of <component>.json files")
      ->required();
  app.add_option("--component", o.component, "the component, e.g. aksNodeController")->required();
  auto* nodes = app.add_option("--nodes", o.nodes_file,
                               "FILE of vmId,subscriptionId,clusterHost lines (the access log "
                               "can produce it)");
  auto* random =
      app.add_option("--random", random_count, "N random nodes (GUID vmIds) instead of --nodes")
          ->check(CLI::Range(uint64_t{1}, uint64_t{svc::kMaxFleetNodes}));
  app.add_option("--seed", o.seed, "seed of --random: the same seed gives the same fleet")
      ->capture_default_str()
      ->needs(random);
  app.add_option("--subscriptions", o.subscriptions,
                 "comma-separated subscriptions --random nodes are drawn from (default: 5 "
                 "made-up ones, which match no subscriptions list)")
      ->delimiter(',')
      ->needs(random);
  app.add_option("--clusters", o.clusters,
                 "comma-separated apiserver hosts --random nodes are drawn from (default: 8 "
                 "made-up *.hcp.<region>.azmk8s.io hosts in eastus, westeurope, southeastasia, "
                 "westus2)")
      ->delimiter(',')
      ->needs(random);
  nodes->excludes(random);  // both ways: CLI11 records the exclusion on each option
  app.add_option("--from", o.from, "RFC 3339 UTC time of the first row")->required();
  app.add_option("--to", o.to, "RFC 3339 UTC time of the last row (included)")->required();
  app.add_option("--every", o.every, "step between rows: 90s, 30m, 6h, 1d, 1h30m")->required();
  app.add_option("--against", o.against,
                 "a second folder (the change about to ship): list the nodes whose answer differs");
  if (auto code = ParseTool(app, argc, argv)) return *code;
  if (random->count() > 0) o.random_count = random_count;
  return svc::RunSimulateTool(o, std::cout, std::cerr);
}

int RunRollout(int argc, char** argv) {
  CLI::App app{
      "Emergency edits of one rollout in a component file, through the validation the service "
      "loads it with: halt (\"halted\": true, and a halt_note of who, when and --reason), hold "
      "(\"hold_at\": --at, default now), resume (continues from the percent it held: the later "
      "steps move by the time it was stopped; \"halted\", \"hold_at\" and \"halt_note\" "
      "removed, a resume_note written and, for a rollout with auto_halt, \"since\" moved to "
      "--at, past the failures). Prints the percent before and after and the next step, then "
      "what changed; writes the file atomically (not with --dry-run), and refuses an edit the "
      "service would refuse. Never serves. Then apply the overlay (docs/OPERATIONS.md, \"Halt a "
      "rollout\").",
      "live-patching-service rollout"};
  app.footer(svc::kToolExitCodes);
  svc::RolloutToolOptions o;
  app.add_option("action", o.action, "halt, hold or resume")
      ->required()
      ->check(CLI::IsMember({"halt", "hold", "resume"}));
  app.add_option("name", o.rollout, "the rollout's name")->required();
  app.add_option("--components-dir", o.components_dir, "folder of <component>.json files")
      ->required();
  app.add_option("--component", o.component, "the component")->capture_default_str();
  app.add_option("--at", o.at, "RFC 3339 UTC time for hold and resume (default: now)");
  app.add_option("--reason", o.reason, "why, into the note (required for halt)");
  app.add_option("--by", o.by, "who, into the note (default: USER@host)");
  app.add_flag("--dry-run", o.dry_run, "print what would change; write nothing");
  if (auto code = ParseTool(app, argc, argv)) return *code;
  return svc::RunRolloutTool(o, std::cout, std::cerr);
}

// The tool argv[1] names, or nullptr: the serving command line.
int (*ToolOf(int argc, char** argv))(int, char**) {
  if (argc < 2) return nullptr;
  const std::string_view name = argv[1];
  if (name == "validate") return RunValidate;
  if (name == "plan") return RunPlan;
  if (name == "simulate") return RunSimulate;
  if (name == "rollout") return RunRollout;
  return nullptr;
}

// ---- the service ----------------------------------------------------------------------------

struct Flags {
  hotfix::service::ServerConfig config;
  std::string rate_limit;
  // Durations in one style (common/duration.h); the old whole-number flags still work.
  std::string refresh_interval = "10s";
  std::string shutdown_grace = "10s";
  std::string testing_response_delay = "0";
  std::string auto_halt_interval = "30s";
  std::string evidence_lookback = "24h";
  std::string max_token_age = "10m";
  std::string refusal_window = "10s";
  std::string memory_limit;
  std::string log_level = "info";
  int old_tls_refresh_s = -1;
  int old_shutdown_grace_s = -1;
  int old_testing_response_delay_ms = -1;
};

void AddFlags(CLI::App& app, Flags& f) {
  auto& c = f.config;
  app.add_option("--listen", c.listen, "ADDR:PORT for gRPC over TLS (port 0: any free port)")
      ->required();
  // Two shapes (docs/SERVICE.md, "TLS"): one pair for every client, or a folder of pairs
  // chosen by the server name each client sent. main() requires one of them.
  auto* cert = app.add_option("--tls-cert", c.tls_cert_path,
                              "PEM certificate chain, leaf first, for the apiserver FQDN the "
                              "nodes dial, issued by the cluster CA (re-read when it changes)");
  auto* key = app.add_option("--tls-key", c.tls_key_path, "PEM private key of --tls-cert");
  auto* cert_dir = app.add_option(
      "--tls-cert-dir", c.tls_cert_dir,
      "instead of --tls-cert/--tls-key, one service for many clusters: a folder of "
      "NAME/tls.crt + NAME/tls.key pairs (kubernetes.io/tls Secrets); each handshake gets the "
      "pair whose DNS SAN matches the server name it sent, else is refused (re-read on change)");
  cert->needs(key);
  key->needs(cert);
  cert_dir->excludes(cert);
  cert_dir->excludes(key);
  app.add_option("--components-dir", c.components_dir,
                 "folder of <component>.json files (a ConfigMap volume); reloaded on change")
      ->required();
  auto* roots = app.add_option("--attestation-roots", c.attestation_roots_path,
                               "PEM bundle the IMDS attested-document signer must chain to");
  auto* issuers = app.add_option("--attestation-issuers", c.attestation_issuers_path,
                                 "instead of --attestation-roots: PEM bundle of the CAs that "
                                 "issue IMDS's signer, trusted as they are (partial chain)");
  app.add_option("--attestation-signer-name", c.attestation_signer_name,
                 "DNS name the signer certificate must carry")
      ->capture_default_str();
  app.add_option("--max-token-age", f.max_token_age,
                 "refuse attested documents created longer ago than this (0: no limit; up to 6h, "
                 "their lifetime): a node fetches its document just before its call")
      ->capture_default_str();
  app.add_option("--allowed-authorities", c.allowed_authorities,
                 "comma-separated patterns the :authority host must match, `*` any run of "
                 "characters, e.g. *.hcp.eastus.azmk8s.io (default: any)")
      ->delimiter(',')
      ->check([](const std::string& pattern) -> std::string {
        return pattern.empty() || pattern.size() > 253 ? "a pattern is 1 to 253 characters" : "";
      });
  app.add_option("--allowed-subscriptions", c.allowed_subscriptions,
                 "comma-separated subscription IDs allowed to call (default: any)")
      ->delimiter(',');
  app.add_option("--allowed-subscriptions-file", c.allowed_subscriptions_file,
                 "file of the subscription IDs allowed to call, read again when it changes "
                 "(instead of --allowed-subscriptions)");
  app.add_option("--rate-limit-per-node", f.rate_limit,
                 "N/s: calls per second per node (vmId), burst of one second (default: none)");
  app.add_option("--metrics-listen", c.metrics_listen, "ADDR:PORT for Prometheus /metrics");
  app.add_option("--prometheus-url", c.prometheus_url,
                 "http(s)://HOST:PORT[/prefix] of the Prometheus that scrapes every replica: the "
                 "evidence of rollouts with auto_halt (without it they are held; "
                 "docs/ROLLOUTS.md)");
  app.add_option("--prometheus-selector", c.prometheus_selector,
                 "label matchers added to every query, e.g. "
                 "job=\"live-patching-service\",namespace=\"kube-system\" (required with "
                 "--prometheus-url)");
  app.add_option("--prometheus-ca", c.prometheus_ca,
                 "PEM CA bundle verifying an https:// --prometheus-url");
  app.add_option("--prometheus-bearer-token-file", c.prometheus_bearer_token_file,
                 "file holding a bearer token for Prometheus (https only; re-read when it "
                 "changes)");
  app.add_option("--evidence-lookback", f.evidence_lookback,
                 "how far back a rollout's first read of the evidence looks (1m to 30d)")
      ->capture_default_str();
  app.add_option("--auto-halt-interval", f.auto_halt_interval,
                 "how often the evidence is read (1s to 1h)")
      ->capture_default_str();
  app.add_option("--health-listen", c.health_listen,
                 "ADDR:PORT for plaintext gRPC health only (kubelet's grpc probe cannot do TLS)");
  app.add_flag("--proxy-protocol", c.proxy_protocol,
               "every connection to --listen starts with a PROXY protocol header, version 2 "
               "(HAProxy send-proxy-v2, Envoy's proxy_protocol transport socket) or 1 (nginx "
               "proxy_protocol): its source is the peer; a connection without one is refused");
  app.add_option("--proxy-protocol-from", c.proxy_protocol_from,
                 "with --proxy-protocol (required): the proxies' networks, comma-separated "
                 "CIDRs (10.0.0.0/8,fd00::/8); a connection from any other address is closed "
                 "before its header is read")
      ->delimiter(',');
  auto* insecure = app.add_flag("--insecure-accept-any-token", c.insecure_accept_any_token,
                                "DEVELOPMENT ONLY: accept any non-empty authorization unverified");
  app.add_option("--refresh-interval", f.refresh_interval,
                 "how often the TLS pair and the attestation roots are checked for changes "
                 "(1s to 1d)")
      ->capture_default_str();
  app.add_option("--threads", c.threads,
                 "event-loop threads (0: one per CPU the process may use, at most its cgroup CPU "
                 "quota rounded up)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  app.add_option("--max-connections", c.max_connections,
                 "open connections at most, TLS handshakes included; more are closed at once "
                 "(0: what --memory-limit and the file-descriptor limit allow)")
      ->capture_default_str();
  app.add_option("--memory-limit", f.memory_limit,
                 "memory the process may use, e.g. 512Mi: the connection cap derives from it "
                 "(default: the cgroup's limit, if any)");
  app.add_option("--max-connections-per-peer", c.max_connections_per_peer,
                 "open connections at most from one source address (with --proxy-protocol the "
                 "node's; behind a proxy without it, the proxy's); more are closed at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-calls-per-connection", c.max_calls_per_connection,
                 "answers one connection gets before GOAWAY (a node makes one call per "
                 "connection; a load generator that never reconnects wants more)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000000));
  app.add_option("--max-refusals-per-peer", c.max_refusals_per_peer,
                 "with --proxy-protocol: a source address at fault this many times within "
                 "--refusal-window (documents missing, malformed or forged, TLS handshakes failed, "
                 "nothing asked in time) has 3 in 4 of its next connections closed before TLS "
                 "until the window ends (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--refusal-window", f.refusal_window,
                 "the window of --max-refusals-per-peer (1s to 1h)")
      ->capture_default_str();
  app.add_option("--shutdown-grace", f.shutdown_grace,
                 "on SIGTERM, how long in-flight calls may take before they are cancelled "
                 "(0 to 1h)")
      ->capture_default_str();
  app.add_option("--log-level", f.log_level,
                 "debug, info, warn or error (warn: no line per OK call)")
      ->capture_default_str();
  // Hidden from --help: a test hook, not an operator's setting (see docs/SERVICE.md).
  app.add_option("--testing-response-delay", f.testing_response_delay)->group("");
  // The names before durations had one style; hidden, still accepted.
  app.add_option("--tls-refresh-seconds", f.old_tls_refresh_s)
      ->check(CLI::Range(1, 86400))
      ->group("");
  app.add_option("--shutdown-grace-seconds", f.old_shutdown_grace_s)
      ->check(CLI::Range(0, 3600))
      ->group("");
  app.add_option("--testing-response-delay-ms", f.old_testing_response_delay_ms)
      ->check(CLI::Range(0, 600000))
      ->group("");
  // Identity must be verified unless the operator explicitly asked for the insecure mode.
  // CLI11's excludes() records the exclusion on both options.
  insecure->excludes(roots);
  insecure->excludes(issuers);
  roots->excludes(issuers);
}

// A duration flag within [least, most].
// The duration and size flags into the config; the old whole-number names when given.
hotfix::Status ApplyDurationsAndSizes(const CLI::App& app, Flags& f) {
  using hotfix::ParseDurationFlag;
  using std::chrono::hours;
  using std::chrono::minutes;
  using std::chrono::seconds;
  auto& c = f.config;
  for (hotfix::Status st : {
           hotfix::ApplyOldDurationFlag("--refresh-interval", app.count("--refresh-interval") > 0,
                                        "--tls-refresh-seconds", f.old_tls_refresh_s, "s",
                                        &f.refresh_interval),
           hotfix::ApplyOldDurationFlag("--shutdown-grace", app.count("--shutdown-grace") > 0,
                                        "--shutdown-grace-seconds", f.old_shutdown_grace_s, "s",
                                        &f.shutdown_grace),
           hotfix::ApplyOldDurationFlag(
               "--testing-response-delay", app.count("--testing-response-delay") > 0,
               "--testing-response-delay-ms", f.old_testing_response_delay_ms, "ms",
               &f.testing_response_delay),
       }) {
    if (!st.ok()) return st;
  }
  auto refresh = ParseDurationFlag("--refresh-interval", f.refresh_interval, seconds(1), hours(24));
  if (!refresh.ok()) return refresh.status();
  if (refresh->count() % 1000 != 0) {
    return hotfix::Status::InvalidArgument("--refresh-interval " + f.refresh_interval +
                                           ": want whole seconds");
  }
  c.tls_refresh = std::chrono::duration_cast<seconds>(*refresh);
  auto grace = ParseDurationFlag("--shutdown-grace", f.shutdown_grace, milliseconds(0), hours(1));
  if (!grace.ok()) return grace.status();
  c.shutdown_grace = *grace;
  auto delay = ParseDurationFlag("--testing-response-delay", f.testing_response_delay,
                                 milliseconds(0), minutes(10));
  if (!delay.ok()) return delay.status();
  c.testing_response_delay = *delay;
  auto interval =
      ParseDurationFlag("--auto-halt-interval", f.auto_halt_interval, seconds(1), hours(1));
  if (!interval.ok()) return interval.status();
  c.auto_halt_interval = *interval;
  auto lookback =
      ParseDurationFlag("--evidence-lookback", f.evidence_lookback, minutes(1), hours(720));
  if (!lookback.ok()) return lookback.status();
  c.evidence_lookback = std::chrono::duration_cast<seconds>(*lookback);
  if (!c.prometheus_url.empty() && c.prometheus_selector.empty()) {
    return hotfix::Status::InvalidArgument(
        "--prometheus-url needs --prometheus-selector: label matchers naming this service's "
        "scrape job, so that no other target's series can move a rollout");
  }
  auto age = ParseDurationFlag("--max-token-age", f.max_token_age, seconds(0), hours(6));
  if (!age.ok()) return age.status();
  c.max_token_age = std::chrono::duration_cast<seconds>(*age);
  auto window = ParseDurationFlag("--refusal-window", f.refusal_window, seconds(1), hours(1));
  if (!window.ok()) return window.status();
  c.refusal_window = *window;
  if (!f.memory_limit.empty()) {
    auto bytes = hotfix::service::ParseByteSize(f.memory_limit);
    if (!bytes.ok()) return bytes.status().Annotate("--memory-limit");
    c.memory_limit = *bytes;
  }
  return hotfix::Status::Ok();
}

// Blocked before any thread exists, so every thread inherits the mask and only sigwait sees
// these: no async-signal-safety puzzles in the handlers.
sigset_t BlockControlSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  // Before OpenSSL allocates anything: what it holds for a connection is charged to that
  // connection (src/service/transport/connection_memory.h).
  hotfix::service::InstallOpenSslMemoryAccounting();
  signal(SIGPIPE, SIG_IGN);
  // The operator's tools have their own flags: the serving flags' ->required() do not apply.
  if (auto tool = ToolOf(argc, argv)) return tool(argc - 1, argv + 1);
  CLI::App app{
      "live-patching-service: answers akslivepatching.v1.LivePatchingService/GetComponentConfig "
      "for nodes that prove their identity with an IMDS attested document."};
  app.footer(
      "Operator tools (read a component folder, never serve; see docs/ROLLOUTS.md):\n"
      "  live-patching-service validate --help   check every file as the service would\n"
      "  live-patching-service plan --help       what one node is served, and why\n"
      "  live-patching-service simulate --help   what a fleet is served over time\n"
      "  live-patching-service rollout --help    halt, hold or resume a rollout in its file");
  app.set_version_flag("--version", std::string("live-patching-service ") + HOTFIX_SERVICE_VERSION +
                                        " (revision " + HOTFIX_GIT_REVISION + ")");
  Flags flags;
  AddFlags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  hotfix::Logger log;
  // Usage errors exit 2, a server that cannot start 1.
  auto refuse = [&log](const hotfix::Status& why, int code) {
    log.Error("refusing to start", {{"error", why}});
    return code;
  };
  auto level = hotfix::ParseLogLevel(flags.log_level);
  if (!level.ok()) return refuse(level.status().Annotate("--log-level"), 2);
  log.set_min_level(*level);
  auto& config = flags.config;
  config.version = HOTFIX_SERVICE_VERSION;
  config.revision = HOTFIX_GIT_REVISION;
  if (config.tls_cert_path.empty() && config.tls_cert_dir.empty()) {
    return refuse(
        hotfix::Status::InvalidArgument("--tls-cert and --tls-key, or --tls-cert-dir, is required"),
        2);
  }
  if (!config.insecure_accept_any_token && config.attestation_roots_path.empty() &&
      config.attestation_issuers_path.empty()) {
    return refuse(hotfix::Status::InvalidArgument(
                      "--attestation-roots or --attestation-issuers is required (or, for "
                      "development only, --insecure-accept-any-token)"),
                  2);
  }
  if (!flags.rate_limit.empty()) {
    auto rate = hotfix::service::ParseRatePerSecond(flags.rate_limit);
    if (!rate.ok()) return refuse(rate.status(), 2);
    config.rate_limit_per_node = *rate;
  }
  hotfix::Status usage = ApplyDurationsAndSizes(app, flags);
  if (!usage.ok()) return refuse(usage, 2);

  // The event loops log: a stalled reader of stderr must not stall them (common/log.h).
  if (hotfix::Status st = log.NeverBlockOnStderr(); !st.ok()) {
    log.Warn("stderr is written as before: a reader that stops reading will stall the service",
             {{"error", st}});
  }
  sigset_t signals = BlockControlSignals();
  auto server = hotfix::service::Server::Start(std::move(config), &log);
  if (!server.ok()) return refuse(server.status(), 1);
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      log.Info("SIGHUP: reloading the component store");
      (*server)->ReloadStore();
      continue;
    }
    log.Info("termination signal received", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    (*server)->Drain();
    return 0;
  }
}
