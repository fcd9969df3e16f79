// grpcgo-server: the benchmark peer for live-patching-service (bench/service_bench.sh). A
// grpc-go 1.33 server doing the same per-call work as the C++ service on the success path:
//   - gRPC over TLS with the same certificate and key (crypto/tls, ALPN h2);
//   - LivePatchingService/GetComponentConfig, authorization metadata = base64 of the IMDS
//     attested document (PKCS#7 SignedData);
//   - identity: a digest cache (SHA-256 of the token -> verified identity, until the document
//     expires, bounded at 100,000 entries) in front of a full verification: strict base64,
//     PKCS#7 signature and chain against --attestation-roots (github.com/fullsailor/pkcs7,
//     Debian golang-github-fullsailor-pkcs7-dev), the signer's DNS name, the JSON content
//     (vmId, subscriptionId, timeStamp.createdOn <= now <= expiresOn);
//   - component name check ([A-Za-z][A-Za-z0-9_.-]{0,63}) and a lookup in an in-memory store
//     read once from --components-dir (<name>.json files; no reload: the bench never changes
//     the store, and a reload watcher costs nothing per call in either server).
//   - one JSON access-log line per call on stderr with the C++ service's fields (time, level,
//     msg, peer, vm_id, subscription_id, insecure_identity, component, code, error,
//     identity_failure, duration_us), one write(2) per line like the C++ logger
//     (--access-log=false turns it off).
//     --trivial answers every call from the store and does nothing else (no identity check, no
//     access log): the ceiling run, bench/service_bench.sh --trivial.
//
// Not replicated (nothing per call on this path in the bench's configuration, or a counter
// increment): allow-list, rate limit, Prometheus metrics, health service, reflection.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	lpv1 "github.com/Azure/agentbaker/aks-live-patching/pkg/gen/akslivepatching/v1"
	"github.com/fullsailor/pkcs7"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

type identity struct {
	vmID, subscriptionID string
	expires              time.Time
}

type authenticator struct {
	roots      *x509.CertPool
	signerName string
	mu         sync.Mutex
	cache      map[[32]byte]identity
}

const maxCache = 100000
const imdsTime = "01/02/06 15:04:05 -0700"

func (a *authenticator) verify(token string) (identity, error) {
	if len(token) == 0 {
		return identity{}, errors.New("missing")
	}
	if len(token) > 64*1024 {
		return identity{}, errors.New("malformed: too large")
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	a.mu.Lock()
	id, ok := a.cache[key]
	a.mu.Unlock()
	if ok {
		if now.After(id.expires) {
			return identity{}, errors.New("expired")
		}
		return id, nil
	}
	der, err := base64.StdEncoding.Strict().DecodeString(token)
	if err != nil {
		return identity{}, fmt.Errorf("malformed: %v", err)
	}
	p7, err := pkcs7.Parse(der)
	if err != nil {
		return identity{}, fmt.Errorf("malformed: %v", err)
	}
	if len(p7.Content) == 0 {
		return identity{}, errors.New("malformed: no embedded content")
	}
	if err := p7.VerifyWithChain(a.roots); err != nil {
		return identity{}, fmt.Errorf("untrusted_signer: %v", err)
	}
	signer := p7.GetOnlySigner()
	if signer == nil || signer.VerifyHostname(a.signerName) != nil {
		return identity{}, errors.New("wrong_signer")
	}
	var doc struct {
		VMID           string `json:"vmId"`
		SubscriptionID string `json:"subscriptionId"`
		TimeStamp      struct {
			CreatedOn string `json:"createdOn"`
			ExpiresOn string `json:"expiresOn"`
		} `json:"timeStamp"`
	}
	if err := json.Unmarshal(p7.Content, &doc); err != nil || doc.VMID == "" || doc.SubscriptionID == "" {
		return identity{}, errors.New("bad_content")
	}
	created, err1 := time.Parse(imdsTime, doc.TimeStamp.CreatedOn)
	expires, err2 := time.Parse(imdsTime, doc.TimeStamp.ExpiresOn)
	if err1 != nil || err2 != nil || expires.Before(created) {
		return identity{}, errors.New("bad_content: timeStamp")
	}
	if now.Before(created) || now.After(expires) {
		return identity{}, errors.New("expired")
	}
	id = identity{doc.VMID, doc.SubscriptionID, expires}
	a.mu.Lock()
	if len(a.cache) >= maxCache {
		for k, v := range a.cache { // expired first, else any one
			if now.After(v.expires) {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= maxCache {
			for k := range a.cache {
				delete(a.cache, k)
				break
			}
		}
	}
	a.cache[key] = id
	a.mu.Unlock()
	return id, nil
}

var componentName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

type server struct {
	lpv1.UnimplementedLivePatchingServiceServer
	auth      *authenticator
	store     map[string]string
	accessLog bool
	logMu     sync.Mutex
	// The bench's ceiling (--trivial): answer from the store, nothing else per call.
	trivial bool
}

func (s *server) logCall(ctx context.Context, start time.Time, id identity, name string, err error, failure string) {
	if !s.accessLog {
		return
	}
	addr := ""
	if p, ok := peer.FromContext(ctx); ok {
		addr = "ipv4:" + p.Addr.String()
	}
	st := status.Convert(err)
	code := strings.ToUpper(st.Code().String()) // OK, UNAUTHENTICATED, NOTFOUND, ...
	b := make([]byte, 0, 512)
	b = append(b, `{"time":`...)
	b = strconv.AppendQuote(b, time.Now().UTC().Format(time.RFC3339Nano))
	b = append(b, `,"level":"INFO","msg":"GetComponentConfig","peer":`...)
	b = strconv.AppendQuote(b, addr)
	b = append(b, `,"vm_id":`...)
	b = strconv.AppendQuote(b, id.vmID)
	b = append(b, `,"subscription_id":`...)
	b = strconv.AppendQuote(b, id.subscriptionID)
	b = append(b, `,"insecure_identity":false,"component":`...)
	b = strconv.AppendQuote(b, name)
	b = append(b, `,"code":`...)
	b = strconv.AppendQuote(b, code)
	b = append(b, `,"error":`...)
	msg := ""
	if err != nil {
		msg = st.Message()
	}
	b = strconv.AppendQuote(b, msg)
	b = append(b, `,"identity_failure":`...)
	b = strconv.AppendQuote(b, failure)
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, time.Since(start).Microseconds(), 10)
	b = append(b, "}\n"...)
	s.logMu.Lock()
	os.Stderr.Write(b)
	s.logMu.Unlock()
}

func (s *server) GetComponentConfig(ctx context.Context, req *lpv1.GetComponentConfigRequest) (*lpv1.GetComponentConfigResponse, error) {
	if s.trivial {
		name := req.GetComponentName()
		return &lpv1.GetComponentConfigResponse{ComponentName: name, Config: s.store[name]}, nil
	}
	start := time.Now()
	id, resp, err, failure := s.call(ctx, req)
	s.logCall(ctx, start, id, req.GetComponentName(), err, failure)
	return resp, err
}

func (s *server) call(ctx context.Context, req *lpv1.GetComponentConfigRequest) (identity, *lpv1.GetComponentConfigResponse, error, string) {
	md, _ := metadata.FromIncomingContext(ctx)
	tokens := md.Get("authorization")
	if len(tokens) != 1 {
		return identity{}, nil, status.Error(codes.Unauthenticated, "node identity not accepted: authorization missing or repeated"), "missing"
	}
	id, err := s.auth.verify(tokens[0])
	if err != nil {
		return identity{}, nil, status.Errorf(codes.Unauthenticated, "node identity not accepted (%v)", err), strings.SplitN(err.Error(), ":", 2)[0]
	}
	name := req.GetComponentName()
	if name == "" {
		return id, nil, status.Error(codes.InvalidArgument, "component_name is required"), ""
	}
	if !componentName.MatchString(name) {
		return id, nil, status.Errorf(codes.InvalidArgument, "component_name %q is invalid", name), ""
	}
	cfg, ok := s.store[name]
	if !ok {
		return id, nil, status.Errorf(codes.NotFound, "component %q not found", name), ""
	}
	return id, &lpv1.GetComponentConfigResponse{ComponentName: name, Config: cfg}, nil, ""
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "ADDR:PORT")
	certFile := flag.String("tls-cert", "", "PEM chain")
	keyFile := flag.String("tls-key", "", "PEM key")
	dir := flag.String("components-dir", "", "folder of <component>.json")
	rootsFile := flag.String("attestation-roots", "", "PEM bundle for the attested documents' signer")
	signerName := flag.String("attestation-signer-name", "metadata.azure.com", "signer DNS name")
	accessLog := flag.Bool("access-log", true, "one JSON line per call on stderr")
	trivial := flag.Bool("trivial", false, "bench ceiling only: no identity check, no access log")
	flag.Parse()
	fail := func(f string, a ...interface{}) { fmt.Fprintf(os.Stderr, "grpcgo-server: "+f+"\n", a...); os.Exit(1) }

	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fail("tls: %v", err)
	}
	pem, err := os.ReadFile(*rootsFile)
	if err != nil {
		fail("attestation roots: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail("attestation roots %s: no certificate", *rootsFile)
	}
	store := map[string]string{}
	files, err := filepath.Glob(filepath.Join(*dir, "*.json"))
	if err != nil || len(files) == 0 {
		fail("components dir %s: no *.json", *dir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fail("%v", err)
		}
		var v map[string]interface{}
		if json.Unmarshal(b, &v) != nil {
			continue
		}
		store[strings.TrimSuffix(filepath.Base(f), ".json")] = string(b)
	}

	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fail("listen: %v", err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	gs := grpc.NewServer(grpc.Creds(creds), grpc.MaxRecvMsgSize(16*1024))
	lpv1.RegisterLivePatchingServiceServer(gs, &server{
		auth:      &authenticator{roots: roots, signerName: *signerName, cache: map[[32]byte]identity{}},
		store:     store,
		accessLog: *accessLog,
		trivial:   *trivial,
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; gs.GracefulStop() }()
	fmt.Fprintf(os.Stderr, "grpcgo-server: listening on %s, %d components\n", lis.Addr(), len(store))
	if err := gs.Serve(lis); err != nil {
		fail("serve: %v", err)
	}
}
