// sniclient: a node's GetComponentConfig call as AgentBaker's check-hotfix makes it since
// #9351 (aks-node-controller/checkhotfix_grpc.go): grpc-go with a TLS config of only the
// cluster CA as roots, TLS 1.2 at least and ALPN ["aks-live-patching","h2"], and no ServerName:
// grpc-go takes it from the dial target's host, so the SNI and the name Go's standard verifier
// checks (a DNS SAN, or for an IP literal no SNI and an IP SAN) are the apiserver host the
// node dialed. service_sni_certs_test runs it against a service serving many clusters.
//
//	sniclient --connect 127.0.0.1:PORT --host APISERVER_HOST --ca CA.pem --token-file F
//
// The TCP connection goes to --connect while the target (and so SNI and :authority) stays
// "<host>:443", as hotfix-agent's --connect-to does. Prints "ok <code> <config>" after an
// answer, or "error <code> <message>" when the call failed (a refused handshake is
// Unavailable with Go's x509 or TLS alert text); exits 0 only for OK.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	lpv1 "github.com/Azure/agentbaker/aks-live-patching/pkg/gen/akslivepatching/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func main() {
	connect := flag.String("connect", "", "HOST:PORT the TCP connection goes to")
	host := flag.String("host", "", "the apiserver host the node dials (FQDN or IP literal)")
	caFile := flag.String("ca", "", "the cluster CA, PEM")
	tokenFile := flag.String("token-file", "", "the attested document (authorization)")
	flag.Parse()
	fail := func(f string, a ...interface{}) { fmt.Fprintf(os.Stderr, "sniclient: "+f+"\n", a...); os.Exit(2) }
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		fail("%v", err)
	}
	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		fail("%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		fail("failed to parse cluster CA PEM")
	}
	creds := credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		NextProtos: []string{"aks-live-patching", "h2"},
	})
	dest := *connect
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, net.JoinHostPort(*host, "443"), grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", dest)
		}))
	if err != nil {
		fail("dial: %v", err)
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", strings.TrimSpace(string(token)))
	resp, err := lpv1.NewLivePatchingServiceClient(conn).GetComponentConfig(ctx,
		&lpv1.GetComponentConfigRequest{ComponentName: "aksNodeController"})
	if err != nil {
		st := status.Convert(err)
		fmt.Printf("error %s %s\n", st.Code(), st.Message())
		os.Exit(1)
	}
	fmt.Printf("ok OK %s\n", resp.GetConfig())
}
