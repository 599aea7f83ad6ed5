// grpc-go's interop TestService (google.golang.org/grpc/interop: the server its interop suite
// runs, with ORCA per-call metrics as in its interop/server) on loopback, plus a burst client:
// the judge of dojang's forwarding over TLS and h2c (test/behaviour/grpc-interop.test.ts).
//
// grpc-go's own interop/server main listens on every interface at a fixed port with its testdata
// certificate; this main serves the same service on 127.0.0.1:0 with the test's certificate and
// prints the port it got. The interop client is grpc-go's own (interop/client, engine.json).
//
//	grpc-interop serve [-tls_cert_file F -tls_key_file F]
//	    prints "listening on PORT", serves until it is killed; a unary call whose metadata has
//	    x-delay-ms: N is answered N ms later (the upgrade test keeps thousands of calls in flight)
//	grpc-interop burst -addr HOST:PORT [-ca_file F -server_name N] [-rounds 150 -concurrency 20
//	    -request_size 271 -response_size 314] [-json_codec]
//	    rounds of concurrent UnaryCalls on one connection, each reply's payload checked; prints
//	    one JSON line: {"ok":N,"codes":{"13":n},"errors":["first few messages"],"badPayload":n}
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	"google.golang.org/grpc/metadata"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grpc-interop serve|burst [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "burst":
		burst(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "usage: grpc-interop serve|burst [flags]")
		os.Exit(2)
	}
}

func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	cert := fs.String("tls_cert_file", "", "serve TLS with this certificate (PEM)")
	key := fs.String("tls_key_file", "", "and this key (PEM)")
	fs.Parse(args)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	// As grpc-go's interop/server main: ORCA per-call metrics and the OOB service beside TestService.
	opts := []grpc.ServerOption{orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(delayUnary)}
	if *cert != "" {
		creds, err := credentials.NewServerTLSFromFile(*cert, *key)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tls:", err)
			os.Exit(1)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	server := grpc.NewServer(opts...)
	recorder := orca.NewServerMetricsRecorder()
	if err := orca.Register(server, orca.ServiceOptions{MinReportingInterval: time.Second, ServerMetricsProvider: recorder}); err != nil {
		fmt.Fprintln(os.Stderr, "orca:", err)
		os.Exit(1)
	}
	testgrpc.RegisterTestServiceServer(server, interop.NewTestServer(interop.NewTestServerOptions{MetricsRecorder: recorder}))
	fmt.Printf("listening on %d\n", lis.Addr().(*net.TCPAddr).Port)
	server.Serve(lis)
}

// delayUnary holds a unary call for as many milliseconds as its x-delay-ms metadata says (a
// cancelled call stops waiting), then lets the TestService answer it.
func delayUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-delay-ms"); len(v) > 0 {
			if ms, err := strconv.Atoi(v[0]); err == nil && ms > 0 {
				select {
				case <-time.After(time.Duration(ms) * time.Millisecond):
				case <-ctx.Done():
					return nil, status.FromContextError(ctx.Err()).Err()
				}
			}
		}
	}
	return handler(ctx, req)
}

type burstResult struct {
	OK         int            `json:"ok"`
	Codes      map[string]int `json:"codes"`
	Errors     []string       `json:"errors"`
	BadPayload int            `json:"badPayload"`
}

func burst(args []string) {
	fs := flag.NewFlagSet("burst", flag.ExitOnError)
	addr := fs.String("addr", "", "HOST:PORT to call")
	caFile := fs.String("ca_file", "", "call over TLS, trusting this CA (PEM)")
	serverName := fs.String("server_name", "localhost", "the TLS server name")
	rounds := fs.Int("rounds", 150, "rounds")
	concurrency := fs.Int("concurrency", 20, "concurrent unary calls per round")
	reqSize := fs.Int("request_size", 271, "request payload bytes")
	respSize := fs.Int("response_size", 314, "response payload bytes")
	timeout := fs.Duration("timeout", 10*time.Second, "each call's deadline")
	fs.Parse(args)
	creds := insecure.NewCredentials()
	if *caFile != "" {
		c, err := credentials.NewClientTLSFromFile(*caFile, *serverName)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tls:", err)
			os.Exit(1)
		}
		creds = c
	}
	// One channel: every call of every round on one HTTP/2 connection.
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	tc := testgrpc.NewTestServiceClient(conn)
	res := burstResult{Codes: map[string]int{}, Errors: []string{}}
	var mu sync.Mutex
	req := &testpb.SimpleRequest{
		ResponseType: testpb.PayloadType_COMPRESSABLE,
		ResponseSize: int32(*respSize),
		Payload:      &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: make([]byte, *reqSize)},
	}
	for r := 0; r < *rounds; r++ {
		var wg sync.WaitGroup
		for i := 0; i < *concurrency; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				defer cancel()
				reply, err := tc.UnaryCall(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					st := status.Convert(err)
					res.Codes[fmt.Sprint(int(st.Code()))]++
					if len(res.Errors) < 5 {
						m := st.Message()
						if len(m) > 300 {
							m = m[:300] + "..."
						}
						res.Errors = append(res.Errors, m)
					}
					return
				}
				p := reply.GetPayload()
				if p.GetType() != testpb.PayloadType_COMPRESSABLE || len(p.GetBody()) != *respSize {
					res.BadPayload++
					return
				}
				res.OK++
			}()
		}
		wg.Wait()
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}
