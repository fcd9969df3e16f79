// benchclient: the helpers bench/service_bench.sh needs besides h2load (call, idle), and the
// load generator of bench/node_boot_bench.sh (boot).
//
//   benchclient call --addr HOST:PORT --token-file F [--n N]
//       N real GetComponentConfig calls (grpc-go, ALPN aks-live-patching,h2 like the node,
//       certificate not verified: the point is the answer) with the token h2load sends;
//       prints "ok <grpc code> <config>" per call and exits 1 unless every call is OK.
//   benchclient idle --addr HOST:PORT --conns N
//       opens N TLS connections (ALPN h2), sends the HTTP/2 client preface and an empty
//       SETTINGS frame on each, reads the server's first frame, then holds them all idle;
//       prints "open N" once they are all up and waits for stdin to close.
//   benchclient boot --addr HOST:PORT --tokens-file F [--skip K] [--parallel P] [--seconds S]
//                    [--server-name SNI] [--authority A] [--timeout-ms T] [--expect CONFIG]
//                    [--report VERSION] [--want-code N]
//       the node-boot load (bench/node_boot_bench.sh): P workers, each in a loop until S
//       seconds have passed or the tokens run out: a new TCP connection, a full TLS handshake
//       (no session resumption; SNI = --server-name, the apiserver's name as a node sends it,
//       which is also the name on the service's certificate since AgentBaker #9351; ALPN
//       aks-live-patching,h2; certificate not verified: the server's work is measured), ONE
//       unary GetComponentConfig with the next unused line of F (from line K+1 on) as
//       `authorization`, then the connection is closed. The call is a raw HTTP/2
//       exchange (golang.org/x/net/http2 framer + hpack) with the headers hotfix-agent sends
//       (:method, :scheme, :path, :authority, content-type, te, grpc-timeout, user-agent,
//       authorization never indexed); it needs :status 200, grpc-status in the trailers (or a
//       trailers-only answer), and for OK a well-framed GetComponentConfigResponse whose
//       config equals --expect when given. Prints on stdout one line
//         result ok=N failed=N grpc_non_ok=N transport_errors=N elapsed_s=X calls_per_s=X
//                client_cpu_s=X tokens_used=N exhausted=0|1 p50_ms=X p99_ms=X max_ms=X
//       then "codes ..." (grpc codes of non-OK answers), "alpn ..." (negotiated protocols)
//       and "errors ..." (transport failures by stage); the first failures go to stderr.
//       Exits 0 when every call was OK, 1 otherwise. With --want-code N a call counts (as
//       "ok") when it ends with grpc code N instead (16: the refused-token rounds). With
//       --report VERSION the one call is
//       instead ReportHotfixOutcome{aksNodeController, VERSION's base, VERSION, INSTALLED},
//       what download-hotfix sends after an install (bench/auto_halt_bench.sh).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	lpv1 "github.com/Azure/agentbaker/aks-live-patching/pkg/gen/akslivepatching/v1"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func call(addr, tokenFile string, n int) {
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	creds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"aks-live-patching", "h2"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := grpc.DialContext(ctx, addr, grpc.WithTransportCredentials(creds), grpc.WithBlock())
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer cc.Close()
	c := lpv1.NewLivePatchingServiceClient(cc)
	bad := 0
	for i := 0; i < n; i++ {
		cctx := metadata.AppendToOutgoingContext(ctx, "authorization", strings.TrimSpace(string(tok)))
		resp, err := c.GetComponentConfig(cctx, &lpv1.GetComponentConfigRequest{ComponentName: "aksNodeController"})
		st := status.Convert(err)
		fmt.Printf("ok %s %s\n", st.Code(), resp.GetConfig())
		if err != nil {
			fmt.Println(st.Message())
			bad++
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}

func idle(addr string, n int) {
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	work := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				d := &net.Dialer{Timeout: 10 * time.Second}
				c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
				if err == nil {
					_, err = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
				}
				if err == nil {
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					hdr := make([]byte, 9)
					_, err = io.ReadFull(c, hdr)
					c.SetReadDeadline(time.Time{})
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("connection %d: %v", i, err)
					}
					mu.Unlock()
					continue
				}
				conns[i] = c
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "idle:", firstErr)
		os.Exit(1)
	}
	// Drain whatever the servers send (SETTINGS ack, pings) so no connection stalls.
	for _, c := range conns {
		go io.Copy(io.Discard, c)
	}
	fmt.Printf("open %d\n", n)
	io.Copy(io.Discard, os.Stdin)
}

// ---- boot: one connection per call, a distinct attested document per call -----------------

const (
	bootPath   = "/akslivepatching.v1.LivePatchingService/GetComponentConfig"
	reportPath = "/akslivepatching.v1.LivePatchingService/ReportHotfixOutcome"
)

type bootOptions struct {
	addr, serverName, authority, userAgent, expect string
	timeout                                        time.Duration
	path                                           string // bootPath or reportPath
	wantCode                                       int    // the code a call must end with
	body                                           []byte // the gRPC-framed request of path
}

// bootError: a call that did not end in a gRPC status, by the stage where it failed.
type bootError struct {
	stage string // dial, tls, alpn, write, h2 (reading the answer), answer (malformed answer)
	err   error
}

func (e *bootError) Error() string { return e.stage + ": " + e.err.Error() }

func failed(stage string, format string, a ...interface{}) *bootError {
	return &bootError{stage, fmt.Errorf(format, a...)}
}

// bootCall makes one node's call on a fresh connection: grpc code (or a *bootError), the
// negotiated ALPN protocol, and the grpc-message of a non-OK answer.
func bootCall(o *bootOptions, token string) (code int, alpn, message string, err error) {
	deadline := time.Now().Add(o.timeout)
	d := net.Dialer{Deadline: deadline}
	raw, err := d.Dial("tcp", o.addr)
	if err != nil {
		return -1, "", "", &bootError{"dial", err}
	}
	defer raw.Close()
	raw.SetDeadline(deadline)
	c := tls.Client(raw, &tls.Config{
		InsecureSkipVerify: true, // the point is the server's work, not the client's checks
		ServerName:         o.serverName,
		NextProtos:         []string{"aks-live-patching", "h2"},
	})
	if err := c.Handshake(); err != nil {
		return -1, "", "", &bootError{"tls", err}
	}
	defer c.Close() // close_notify, then the TCP close: the node's process ends its channel
	alpn = c.ConnectionState().NegotiatedProtocol
	if alpn != "aks-live-patching" && alpn != "h2" {
		return -1, alpn, "", failed("alpn", "server chose ALPN %q", alpn)
	}

	bw := bufio.NewWriterSize(c, 8192)
	fr := http2.NewFramer(bw, bufio.NewReaderSize(c, 8192))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 64 << 10
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	remaining := time.Until(deadline).Milliseconds()
	if remaining < 1 {
		remaining = 1
	}
	// The order and flags of src/wire/grpc_unary.cc's SubmitRequest (hotfix-agent).
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "https"},
		{Name: ":path", Value: o.path},
		{Name: ":authority", Value: o.authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
		{Name: "grpc-timeout", Value: strconv.FormatInt(remaining, 10) + "m"},
		{Name: "user-agent", Value: o.userAgent},
		{Name: "authorization", Value: token, Sensitive: true},
	} {
		enc.WriteField(f)
	}
	_, err = bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = fr.WriteSettings()
	}
	if err == nil {
		err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true})
	}
	if err == nil {
		err = fr.WriteData(1, true, o.body)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return -1, alpn, "", &bootError{"write", err}
	}

	httpStatus, contentType, grpcStatus := "", "", ""
	var msg []byte
	for done := false; !done; {
		f, err := fr.ReadFrame()
		if err != nil {
			return -1, alpn, "", &bootError{"h2", err}
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err == nil {
					bw.Flush()
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := fr.WritePing(true, f.Data); err == nil {
					bw.Flush()
				}
			}
		case *http2.WindowUpdateFrame:
		case *http2.GoAwayFrame:
			// A GOAWAY that names our stream as processed still lets it finish (RFC 9113,
			// section 6.8): the service sends one with its answer to a refused identity.
			if f.ErrCode != http2.ErrCodeNo || f.LastStreamID < 1 {
				return -1, alpn, "", failed("h2", "GOAWAY %v before the answer: %q", f.ErrCode, f.DebugData())
			}
		case *http2.RSTStreamFrame:
			return -1, alpn, "", failed("h2", "RST_STREAM %v", f.ErrCode)
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				return -1, alpn, "", failed("answer", "HEADERS on stream %d", f.StreamID)
			}
			for _, hf := range f.Fields {
				switch hf.Name {
				case ":status":
					httpStatus = hf.Value
				case "content-type":
					contentType = hf.Value
				case "grpc-status":
					grpcStatus = hf.Value
				case "grpc-message":
					message = hf.Value
				}
			}
			done = f.StreamEnded()
		case *http2.DataFrame:
			if f.StreamID != 1 {
				return -1, alpn, "", failed("answer", "DATA on stream %d", f.StreamID)
			}
			msg = append(msg, f.Data()...)
			if f.StreamEnded() {
				return -1, alpn, "", failed("answer", "stream ended without trailers")
			}
		}
	}
	if httpStatus != "200" {
		return -1, alpn, "", failed("answer", ":status %q", httpStatus)
	}
	if !strings.HasPrefix(contentType, "application/grpc") {
		return -1, alpn, "", failed("answer", "content-type %q", contentType)
	}
	code, err = strconv.Atoi(grpcStatus)
	if err != nil {
		return -1, alpn, "", failed("answer", "grpc-status %q", grpcStatus)
	}
	if code != 0 {
		return code, alpn, message, nil
	}
	if len(msg) < 5 || msg[0] != 0 || int(binary.BigEndian.Uint32(msg[1:5])) != len(msg)-5 {
		return -1, alpn, "", failed("answer", "OK without one uncompressed message (%d bytes)", len(msg))
	}
	if o.path == reportPath {
		var resp lpv1.ReportHotfixOutcomeResponse
		if err := proto.Unmarshal(msg[5:], &resp); err != nil {
			return -1, alpn, "", failed("answer", "response does not parse: %v", err)
		}
		return 0, alpn, "", nil
	}
	var resp lpv1.GetComponentConfigResponse
	if err := proto.Unmarshal(msg[5:], &resp); err != nil {
		return -1, alpn, "", failed("answer", "response does not parse: %v", err)
	}
	if o.expect != "" && resp.GetConfig() != o.expect {
		return -1, alpn, "", failed("answer", "config %q, want %q", resp.GetConfig(), o.expect)
	}
	return 0, alpn, "", nil
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func boot(o *bootOptions, tokensFile string, skip, parallel int, seconds float64) {
	data, err := os.ReadFile(tokensFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "boot:", err)
		os.Exit(2)
	}
	tokens := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if skip < 0 || skip >= len(tokens) {
		fmt.Fprintf(os.Stderr, "boot: --skip %d leaves no token of %d\n", skip, len(tokens))
		os.Exit(2)
	}
	tokens = tokens[skip:]
	data = nil

	type workerStats struct {
		ok, nonOK  int
		codes      map[int]int
		alpn       map[string]int
		stages     map[string]int
		durations  []time.Duration // OK calls
		firstError []string
	}
	var next int64 = -1
	var exhausted int32
	stats := make([]*workerStats, parallel)
	cpu0 := cpuSeconds()
	start := time.Now()
	stopAt := start.Add(time.Duration(seconds * float64(time.Second)))
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		st := &workerStats{codes: map[int]int{}, alpn: map[string]int{}, stages: map[string]int{}}
		stats[w] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stopAt) {
				i := atomic.AddInt64(&next, 1)
				if i >= int64(len(tokens)) {
					atomic.StoreInt32(&exhausted, 1)
					return
				}
				t0 := time.Now()
				code, alpn, message, err := bootCall(o, tokens[i])
				dt := time.Since(t0)
				if alpn != "" {
					st.alpn[alpn]++
				}
				var be *bootError
				switch {
				case errors.As(err, &be):
					st.stages[be.stage]++
				case code == o.wantCode:
					st.ok++
					st.durations = append(st.durations, dt)
					continue
				default:
					st.nonOK++
					st.codes[code]++
				}
				if len(st.firstError) < 3 {
					if err == nil {
						err = fmt.Errorf("grpc code %d (%s): %s", code, strings.ToUpper(codes.Code(code).String()), message)
					}
					st.firstError = append(st.firstError, fmt.Sprintf("token %d: %v", skip+int(i), err))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0

	total := &workerStats{codes: map[int]int{}, alpn: map[string]int{}, stages: map[string]int{}}
	for _, st := range stats {
		total.ok += st.ok
		total.nonOK += st.nonOK
		for k, v := range st.codes {
			total.codes[k] += v
		}
		for k, v := range st.alpn {
			total.alpn[k] += v
		}
		for k, v := range st.stages {
			total.stages[k] += v
		}
		total.durations = append(total.durations, st.durations...)
		for _, e := range st.firstError {
			if len(total.firstError) < 10 {
				total.firstError = append(total.firstError, e)
			}
		}
	}
	transport := 0
	for _, v := range total.stages {
		transport += v
	}
	sort.Slice(total.durations, func(a, b int) bool { return total.durations[a] < total.durations[b] })
	pct := func(p float64) float64 { // nearest rank, ms
		n := len(total.durations)
		if n == 0 {
			return 0
		}
		i := int(p*float64(n)+0.999999) - 1
		if i < 0 {
			i = 0
		}
		return float64(total.durations[i].Microseconds()) / 1000
	}
	used := atomic.LoadInt64(&next) + 1
	if used > int64(len(tokens)) {
		used = int64(len(tokens))
	}
	failedCalls := total.nonOK + transport
	fmt.Printf("result ok=%d failed=%d grpc_non_ok=%d transport_errors=%d elapsed_s=%.3f calls_per_s=%.1f"+
		" client_cpu_s=%.3f tokens_used=%d exhausted=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n",
		total.ok, failedCalls, total.nonOK, transport, elapsed, float64(total.ok)/elapsed, cpu, used,
		atomic.LoadInt32(&exhausted), pct(0.50), pct(0.99), pct(1))
	kv := func(label string, m map[string]int) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Print(label)
		for _, k := range keys {
			fmt.Printf(" %s=%d", k, m[k])
		}
		fmt.Println()
	}
	byName := map[string]int{}
	for k, v := range total.codes {
		byName[strings.ToUpper(codes.Code(k).String())] += v
	}
	kv("codes", byName)
	kv("alpn", total.alpn)
	kv("errors", total.stages)
	for _, e := range total.firstError {
		fmt.Fprintln(os.Stderr, "boot: failed call:", e)
	}
	if failedCalls > 0 {
		os.Exit(1)
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchclient call|idle|boot ...")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "", "HOST:PORT")
	tokenFile := fs.String("token-file", "", "file holding the authorization value")
	n := fs.Int("n", 3, "calls")
	conns := fs.Int("conns", 5000, "idle connections")
	tokensFile := fs.String("tokens-file", "", "boot: one authorization value per line, each used once")
	skip := fs.Int("skip", 0, "boot: lines of --tokens-file already used")
	parallel := fs.Int("parallel", 32, "boot: concurrent connecting workers")
	seconds := fs.Float64("seconds", 10, "boot: start no call after this many seconds")
	serverName := fs.String("server-name", "bench-aks-dns-12345678.hcp.eastus.azmk8s.io", "boot: TLS SNI (the node sends the apiserver's name)")
	authority := fs.String("authority", "", "boot: :authority (default: --server-name)")
	timeoutMs := fs.Int("timeout-ms", 3000, "boot: per-call budget from dial to answer (grpc-timeout: what is left of it)")
	expect := fs.String("expect", "", "boot: the config an OK answer must carry (empty: any)")
	report := fs.String("report", "", "boot: send ReportHotfixOutcome for this hotfix version (INSTALLED) instead of GetComponentConfig")
	wantCode := fs.Int("want-code", 0, "boot: the grpc code a call must end with to count (16: refused tokens)")
	fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "call":
		call(*addr, *tokenFile, *n)
	case "idle":
		idle(*addr, *conns)
	case "boot":
		if *authority == "" {
			*authority = *serverName
		}
		if *parallel < 1 || *seconds <= 0 || *tokensFile == "" || *addr == "" {
			fmt.Fprintln(os.Stderr, "boot: --addr, --tokens-file, --parallel >= 1 and --seconds > 0 are required")
			os.Exit(2)
		}
		// GetComponentConfigRequest{component_name: "aksNodeController"}, gRPC-framed; or
		// with --report, what download-hotfix sends after an install.
		path := bootPath
		req, _ := proto.Marshal(&lpv1.GetComponentConfigRequest{ComponentName: "aksNodeController"})
		if *report != "" && len(*report) > 9 {
			path = reportPath
			req, _ = proto.Marshal(&lpv1.ReportHotfixOutcomeRequest{
				ComponentName: "aksNodeController", BaseVersion: (*report)[:9],
				HotfixVersion: *report, Outcome: lpv1.HotfixOutcome_HOTFIX_OUTCOME_INSTALLED,
			})
		}
		body := append([]byte{0, 0, 0, 0, 0}, req...)
		binary.BigEndian.PutUint32(body[1:5], uint32(len(req)))
		boot(&bootOptions{
			addr: *addr, serverName: *serverName, authority: *authority,
			userAgent: "hotfix-agent/202604.01.0", expect: *expect,
			timeout: time.Duration(*timeoutMs) * time.Millisecond, path: path, body: body,
			wantCode: *wantCode,
		}, *tokensFile, *skip, *parallel, *seconds)
	default:
		os.Exit(2)
	}
}
