// benchclient: the two helpers bench/service_bench.sh needs besides h2load.
//
//   benchclient call --addr HOST:PORT --token-file F [--n N]
//       N real GetComponentConfig calls (grpc-go, ALPN aks-live-patching,h2 like the node,
//       certificate not verified: the point is the answer) with the token h2load sends;
//       prints "ok <grpc code> <config>" per call and exits 1 unless every call is OK.
//   benchclient idle --addr HOST:PORT --conns N
//       opens N TLS connections (ALPN h2), sends the HTTP/2 client preface and an empty
//       SETTINGS frame on each, reads the server's first frame, then holds them all idle;
//       prints "open N" once they are all up and waits for stdin to close.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	lpv1 "github.com/Azure/agentbaker/aks-live-patching/pkg/gen/akslivepatching/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchclient call|idle ...")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "", "HOST:PORT")
	tokenFile := fs.String("token-file", "", "file holding the authorization value")
	n := fs.Int("n", 3, "calls")
	conns := fs.Int("conns", 5000, "idle connections")
	fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "call":
		call(*addr, *tokenFile, *n)
	case "idle":
		idle(*addr, *conns)
	default:
		os.Exit(2)
	}
}
