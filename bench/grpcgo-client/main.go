// grpcgo-client: the benchmark peer for hotfix-agent. It reproduces AgentBaker's Go
// `aks-node-controller check-hotfix` (checkHotfix in aks-node-controller/checkhotfix.go and
// what it calls) as closely as Debian 12's grpc-go 1.33 allows, so that bench/client_bench.sh
// compares two programs doing the same work: read the node config, fetch the IMDS attested
// document, dial the live-patching service through the ALPN-routing proxy, call
// GetComponentConfig, stage the pointer with a read-modify-write, write one guest-agent event
// and JSON log lines. The dial is the reference's since AgentBaker #9351 and grpc.WithNoProxy
// (aks-node-controller/checkhotfix_grpc.go @8062e4b768): the service's certificate verified
// against the cluster CA for the apiserver host, no proxy.
//
// Deliberate differences from the reference, and why they do not favour hotfix-agent:
//   - grpc.DialContext (non-blocking, like NewClient's lazy connect) instead of
//     grpc.NewClient, which grpc-go 1.33 does not have. DialContext's default resolver is
//     "passthrough", NewClient's is "dns": with --connect-to neither client resolves the
//     apiserver name, so both skip DNS here.
//   - --connect-to HOST:PORT is a grpc.WithContextDialer that sends the TCP connection
//     elsewhere while the server name (taken by credentials.NewTLS from the authority: the
//     SNI and the name the certificate is verified for) and :authority stay
//     "<apiserver host>:443", exactly what hotfix-agent's --connect-to does. The proxy is off
//     with or without it (grpc.WithNoProxy, as the reference).
//   - The node config is decoded with encoding/json (snake_case or lowerCamelCase keys) rather
//     than protojson into the full generated AKSNodeConfig; protojson would only make the Go
//     side slower.
//   - Logs use a tiny JSON line writer: Go 1.19 has no log/slog. Same lines, same sinks
//     (the log file and stderr).
//   - grpc-go 1.33 does not reject a handshake without a negotiated ALPN protocol (newer
//     grpc-go does); the proxy always negotiates h2 here, so the wire is the same.
//   - No nbc-cmd.sh fallback (--nbc-cmd is accepted and ignored): the bench always provides
//     the node config, so the fallback never runs in either client.
//
// The protobuf types come from protoc-gen-go 1.28 / protoc-gen-go-grpc 1.33 (Debian packages
// protoc-gen-go, protoc-gen-go-grpc), generated into the reference's own import path: the
// generated-code path is what the reference runs, so the comparison uses it too rather than
// a hand-written codec.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	lpv1 "github.com/Azure/agentbaker/aks-live-patching/pkg/gen/akslivepatching/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Constants of the reference (appendix of the behavioural spec).
const (
	lpsALPNProto           = "aks-live-patching"
	alpnH2Proto            = "h2"
	lpsAPIServerPort       = "443"
	lpsFetchTimeout        = 3 * time.Second
	imdsDialTimeout        = 1 * time.Second
	imdsTLSTimeout         = 1 * time.Second
	imdsHeaderTimeout      = 1 * time.Second
	imdsAttemptTimeout     = 2 * time.Second
	imdsMaxAttempts        = 2
	imdsBodyCap            = 1 << 20
	ancComponentName       = "aksNodeController"
	lpsAttestedMetadataKey = "authorization"
	eventVersion           = "1.23"
	eventTimeLayout        = "2006-01-02 15:04:05.000"
)

// ---------------------------------------------------------------------------------------
// Logging: JSON lines to the log file and stderr, like the reference's slog handler.

type logger struct {
	mu  sync.Mutex
	out []io.Writer
}

func (l *logger) log(level, msg string, kv ...interface{}) {
	var b bytes.Buffer
	b.WriteString(`{"time":`)
	t, _ := json.Marshal(time.Now().Format(time.RFC3339Nano))
	b.Write(t)
	b.WriteString(`,"level":"` + level + `","msg":`)
	m, _ := json.Marshal(msg)
	b.Write(m)
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := json.Marshal(fmt.Sprint(kv[i]))
		v := kv[i+1]
		if err, ok := v.(error); ok {
			v = err.Error()
		}
		vb, err := json.Marshal(v)
		if err != nil {
			vb, _ = json.Marshal(fmt.Sprint(v))
		}
		b.WriteByte(',')
		b.Write(k)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteString("}\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.out {
		_, _ = w.Write(b.Bytes())
	}
}

func (l *logger) Info(msg string, kv ...interface{})  { l.log("INFO", msg, kv...) }
func (l *logger) Warn(msg string, kv ...interface{})  { l.log("WARN", msg, kv...) }
func (l *logger) Error(msg string, kv ...interface{}) { l.log("ERROR", msg, kv...) }

// ---------------------------------------------------------------------------------------
// Endpoint resolution (docs/REFERENCE.md, "Inputs"): apiserver FQDN and cluster CA from the AKSNodeConfig JSON.

type apiServerConfig struct {
	APIServerName      string `json:"api_server_name"`
	APIServerNameCamel string `json:"apiServerName"`
}

type nodeConfig struct {
	APIServerConfig       *apiServerConfig `json:"api_server_config"`
	APIServerConfigCamel  *apiServerConfig `json:"apiServerConfig"`
	KubernetesCACert      string           `json:"kubernetes_ca_cert"`
	KubernetesCACertCamel string           `json:"kubernetesCaCert"`
}

func lpsTargetFromNodeConfig(path string) (string, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("reading node config %s: %w", path, err)
	}
	var cfg nodeConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", nil, fmt.Errorf("node config has no api_server_config.api_server_name (parse error: %v)", err)
	}
	fqdn := ""
	for _, a := range []*apiServerConfig{cfg.APIServerConfig, cfg.APIServerConfigCamel} {
		if a != nil && fqdn == "" {
			fqdn = a.APIServerName
			if fqdn == "" {
				fqdn = a.APIServerNameCamel
			}
		}
	}
	if fqdn == "" {
		return "", nil, errors.New("node config has no api_server_config.api_server_name")
	}
	caB64 := cfg.KubernetesCACert
	if caB64 == "" {
		caB64 = cfg.KubernetesCACertCamel
	}
	var ca []byte
	if caB64 != "" {
		if ca, err = base64.StdEncoding.DecodeString(caB64); err != nil {
			return "", nil, fmt.Errorf("decoding node config kubernetes_ca_cert: %w", err)
		}
	}
	return fqdn, ca, nil
}

// ---------------------------------------------------------------------------------------
// IMDS attested token (docs/REFERENCE.md, "Identity"): net/http, proxy disabled, dial 1 s, headers 1 s, attempt 2 s,
// 2 attempts without sleep, 1 MiB cap.

func newIMDSClient() *http.Client {
	return &http.Client{
		Timeout: imdsAttemptTimeout,
		Transport: &http.Transport{
			Proxy:                 nil, // never proxied
			DialContext:           (&net.Dialer{Timeout: imdsDialTimeout}).DialContext,
			TLSHandshakeTimeout:   imdsTLSTimeout,
			ResponseHeaderTimeout: imdsHeaderTimeout,
		},
	}
}

func fetchIMDSAttestedTokenOnce(ctx context.Context, client *http.Client, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, imdsAttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Metadata", "true")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, imdsBodyCap))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("imds returned status %d", resp.StatusCode)
	}
	var doc struct {
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("decoding imds response: %w", err)
	}
	if doc.Signature == "" {
		return "", errors.New("imds attested document had empty signature")
	}
	return doc.Signature, nil
}

func fetchIMDSAttestedToken(ctx context.Context, url string, log *logger) (string, error) {
	client := newIMDSClient()
	var lastErr error
	for attempt := 1; attempt <= imdsMaxAttempts; attempt++ {
		tok, err := fetchIMDSAttestedTokenOnce(ctx, client, url)
		if err == nil {
			return tok, nil
		}
		lastErr = err
		if attempt < imdsMaxAttempts && ctx.Err() == nil {
			log.Warn("fetch attempt failed, retrying", "attempt", attempt, "maxAttempts", imdsMaxAttempts, "error", err)
		}
	}
	return "", lastErr
}

// ---------------------------------------------------------------------------------------
// TLS + gRPC (docs/REFERENCE.md, "The connection", "The call").

// dialHost: net.SplitHostPort's host when the name splits, the raw name otherwise; always
// port 443 (docs/REFERENCE.md, "Inputs").
func dialTarget(apiServerName string) string {
	host := apiServerName
	if h, _, err := net.SplitHostPort(apiServerName); err == nil {
		host = h
	}
	return net.JoinHostPort(host, lpsAPIServerPort)
}

type opts struct {
	nodeConfig, pointer, imdsURL, connectTo, component string
	eventsDir, logFile, currentVersion                 string
}

func fetchLPS(o opts, log *logger) ([]byte, error) {
	fqdn, caPEM, err := lpsTargetFromNodeConfig(o.nodeConfig)
	if err != nil {
		return nil, fmt.Errorf("resolving LPS endpoint: %w", err)
	}
	token, err := fetchIMDSAttestedToken(context.Background(), o.imdsURL, log)
	if err != nil {
		return nil, fmt.Errorf("imds attested token: %w", err)
	}
	if len(caPEM) == 0 {
		return nil, errors.New("dialing LPS gRPC: cluster CA unavailable from provision-config; refusing to fetch over unverified TLS")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("dialing LPS gRPC: failed to parse cluster CA PEM")
	}
	// AgentBaker #9351: Go's standard verification against the cluster CA alone (no system
	// roots), for the apiserver host. No ServerName: credentials.NewTLS fills it from the
	// dial target's host (port stripped), and that one name is both the SNI and the name the
	// certificate must carry (for an IP literal, no SNI and the IP SANs are checked). The
	// service presents a certificate for the same apiserver FQDN.
	creds := credentials.NewTLS(&tls.Config{
		RootCAs:    pool,
		NextProtos: []string{lpsALPNProto, alpnH2Proto},
		MinVersion: tls.VersionTLS12,
	})

	target := dialTarget(fqdn)
	ctx, cancel := context.WithTimeout(context.Background(), lpsFetchTimeout)
	defer cancel()
	// grpc.WithNoProxy: HTTPS_PROXY/NO_PROXY are ignored, TCP goes straight to the target (or
	// to --connect-to), as in the reference.
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithNoProxy()}
	if o.connectTo != "" {
		dest := o.connectTo
		dialOpts = append(dialOpts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", dest)
		}))
	}
	conn, err := grpc.DialContext(ctx, target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("dialing LPS gRPC: %w", err)
	}
	defer conn.Close()
	log.Info("check-hotfix LPS gRPC dial", "dialHost", fqdn, "alpn", lpsALPNProto, "component", o.component)

	ctx = metadata.AppendToOutgoingContext(ctx, lpsAttestedMetadataKey, token)
	resp, err := lpv1.NewLivePatchingServiceClient(conn).GetComponentConfig(ctx,
		&lpv1.GetComponentConfigRequest{ComponentName: o.component})
	if err != nil {
		return nil, err // a status error, classified by the caller
	}
	return []byte(resp.GetConfig()), nil
}

// ---------------------------------------------------------------------------------------
// Pointer file (docs/REFERENCE.md, "Served config", "The pointer file", "download-hotfix").

type hotfixConfig struct {
	Version        string            `json:"version,omitempty"`
	ScriptsVersion string            `json:"scripts_version,omitempty"`
	Hotfixes       map[string]string `json:"hotfixes,omitempty"`
}

func parseHotfixConfig(b []byte) (hotfixConfig, error) {
	var c hotfixConfig
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("unmarshaling hotfix pointer JSON: %w", err)
	}
	return c, nil
}

func readHotfixConfig(path string) (hotfixConfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return hotfixConfig{}, nil
	}
	if err != nil {
		return hotfixConfig{}, err
	}
	c, err := parseHotfixConfig(b)
	if err != nil {
		return c, fmt.Errorf("parsing hotfix config %s: %w", path, err)
	}
	return c, nil
}

// writeHotfixConfig: read-modify-write keeping version and scripts_version, replacing
// hotfixes; temp file in the same folder, chmod, rename; no fsync (as the reference).
func writeHotfixConfig(path string, hotfixes map[string]string, log *logger) error {
	old, err := readHotfixConfig(path)
	if err != nil {
		log.Warn("could not read existing hotfix pointer; version/scripts_version will not be preserved", "path", path, "error", err)
		old = hotfixConfig{}
	}
	if hotfixes == nil {
		hotfixes = map[string]string{}
	}
	out := struct {
		Version        string            `json:"version,omitempty"`
		ScriptsVersion string            `json:"scripts_version,omitempty"`
		Hotfixes       map[string]string `json:"hotfixes"`
	}{old.Version, old.ScriptsVersion, hotfixes}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".aks-node-controller-hotfix-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmpName, mode); err != nil {
		return err
	}
	if err := os.Rename(tmpName, path); err != nil {
		return err
	}
	ok = true
	log.Info("staged hotfix pointer for download-hotfix", "path", path)
	return nil
}

func resolveVersion(c hotfixConfig, current string, log *logger) string {
	if len(c.Hotfixes) == 0 {
		return strings.TrimSpace(c.Version)
	}
	parts := strings.SplitN(strings.TrimSpace(current), ".", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		log.Warn("cannot derive hotfix base from current version, skipping hotfix", "version", current)
		return ""
	}
	return strings.TrimSpace(c.Hotfixes[parts[0]+"."+parts[1]])
}

// coldStartHotfixConfig: a top-level "hotfixes" map in the node config (docs/REFERENCE.md, "Cold-start map").
func coldStartHotfixConfig(path string) (map[string]string, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading node config %s: %w", path, err)
	}
	var c struct {
		Hotfixes map[string]string `json:"hotfixes"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, false, fmt.Errorf("parsing cold-start hotfixes from node config: %w", err)
	}
	return c.Hotfixes, len(c.Hotfixes) > 0, nil
}

// ---------------------------------------------------------------------------------------
// The workflow (docs/REFERENCE.md, "Algorithm", "Outcomes") and the guest-agent event.

func checkHotfix(o opts, log *logger) (string, error) {
	body, fetchErr := fetchLPS(o, log)
	if fetchErr != nil {
		if st, isStatus := status.FromError(fetchErr); isStatus {
			switch st.Code() {
			case codes.Unauthenticated, codes.PermissionDenied, codes.NotFound:
				log.Info("LPS reports no hotfix available for this node (fail-open)",
					"reason", fmt.Sprintf("LPS has no hotfix available for this node (code %s)", st.Code()))
				return "noHotfixAvailable", nil
			case codes.InvalidArgument, codes.ResourceExhausted:
				log.Warn("LPS returned a client error; not falling back to cold-start pointer (fail-open)", "error", fetchErr)
				return "failed", fmt.Errorf("LPS fetch failed with a client error, not falling back: LPS gRPC call failed with code %s", st.Code())
			}
			fetchErr = fmt.Errorf("LPS gRPC call failed with code %s", st.Code())
		}
		log.Warn("failed to reach LPS, attempting cold-start fallback", "error", fetchErr)
		cold, present, err := coldStartHotfixConfig(o.nodeConfig)
		if err != nil {
			return "failed", fmt.Errorf("LPS fetch failed (%v) and cold-start fallback failed: %w", fetchErr, err)
		}
		if !present {
			return "failed", fmt.Errorf("LPS fetch failed and no cold-start pointer present: %w", fetchErr)
		}
		if err := writeHotfixConfig(o.pointer, cold, log); err != nil {
			return "failed", fmt.Errorf("writing cold-start hotfix config: %w", err)
		}
		return "customDataFallback", nil
	}
	served, err := parseHotfixConfig(body)
	if err != nil {
		return "failed", fmt.Errorf("parsing LPS hotfix pointer: %w", err)
	}
	if len(served.Hotfixes) == 0 {
		log.Info("LPS returned no hotfixes for this node; leaving existing pointer intact (fail-open)")
		return "noHotfixAvailable", nil
	}
	if err := writeHotfixConfig(o.pointer, served.Hotfixes, log); err != nil {
		return "failed", fmt.Errorf("writing hotfix config: %w", err)
	}
	if resolveVersion(hotfixConfig{Hotfixes: served.Hotfixes}, o.currentVersion, log) != "" {
		return "lpsRead", nil
	}
	return "noHotfixForBase", nil
}

func writeEvent(dir string, isError bool, message string, start, end time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	level := "Informational"
	if isError {
		level = "Error"
	}
	timing := fmt.Sprintf("startTime=%s endTime=%s durationMs=%d", start.Format(eventTimeLayout),
		end.Format(eventTimeLayout), end.Sub(start).Milliseconds())
	if message != "" {
		message += " | " + timing
	} else {
		message = timing
	}
	ev := struct {
		Timestamp, OperationId, Version, TaskName, EventLevel, Message, EventPid, EventTid string
	}{start.Format(eventTimeLayout), end.Format(eventTimeLayout), eventVersion,
		"AKS.AKSNodeController.CheckHotfix", level, message, "0", "0"}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	name := filepath.Join(dir, strconv.FormatInt(time.Now().UnixNano(), 10)+".json")
	return os.WriteFile(name, data, 0o644)
}

func main() {
	var o opts
	fs := flag.NewFlagSet("check-hotfix", flag.ExitOnError)
	fs.StringVar(&o.nodeConfig, "node-config", "/opt/azure/containers/aks-node-controller-config.json", "AKSNodeConfig JSON")
	_ = fs.String("nbc-cmd", "", "accepted for flag parity with hotfix-agent; unused")
	fs.StringVar(&o.pointer, "hotfix-pointer", "/opt/azure/containers/aks-node-controller-hotfix.json", "pointer file")
	fs.StringVar(&o.imdsURL, "imds-url", "http://169.254.169.254/metadata/attested/document?api-version=2025-04-07", "IMDS URL")
	fs.StringVar(&o.connectTo, "connect-to", "", "HOST:PORT TCP destination; SNI and :authority stay the apiserver's")
	fs.StringVar(&o.component, "component", ancComponentName, "component")
	fs.StringVar(&o.eventsDir, "events-dir", "/var/log/azure/Microsoft.Azure.Extensions.CustomScript/events", "events folder")
	fs.StringVar(&o.logFile, "log-file", "/var/log/azure/aks-node-controller.log", "log file")
	fs.StringVar(&o.currentVersion, "current-version", "dev", "this node's version")
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--version" { // for the startup-cost measurement
		fmt.Println("grpcgo-client (grpc-go " + grpc.Version + ")")
		return
	}
	if len(args) > 0 && args[0] == "check-hotfix" { // same command line as hotfix-agent
		args = args[1:]
	}
	_ = fs.Parse(args)

	log := &logger{out: []io.Writer{os.Stderr}}
	if f, err := os.OpenFile(o.logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		defer f.Close()
		log.out = append(log.out, f)
	} else {
		fmt.Fprintln(os.Stderr, "cannot open log file:", err)
		os.Exit(1) // the reference's main.go exits 1 here
	}

	log.Info("aks-node-controller check-hotfix started")
	start := time.Now()
	outcome, err := checkHotfix(o, log)
	msg := "check-hotfix outcome=" + outcome
	if err != nil {
		msg += " error=" + err.Error()
	}
	if evErr := writeEvent(o.eventsDir, outcome == "failed", msg, start, time.Now()); evErr != nil {
		log.Error("failed to write guest agent event", "error", evErr)
	}
	if err != nil {
		log.Warn("check-hotfix completed with error (fail-open)", "outcome", outcome, "error", err)
	} else {
		log.Info("check-hotfix completed", "outcome", outcome)
	}
}
