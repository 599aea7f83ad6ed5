// path-judge: the upstreams that judge how dojang reads a call's :path (issue 0.5.1 item 1). A
// proxy that decides on one reading of the path while the upstream acts on another lets a denied
// method through; these are the upstreams that act, run as they are, each counting what reaches it.
//
// One process, three loopback ports (printed on one line at start, "path-judge connect=... grpc=...
// admin=..."):
//   - connect: a connect-go v1.19 server (gRPC, gRPC-Web and Connect; HTTP/1.1 and h2c) serving
//     pkg.Svc/Unary and pkg.Svc/Open, mounted as protoc-gen-connect-go mounts a service: one
//     ServeMux entry for "/pkg.Svc/" and a switch on the request's r.URL.Path (net/http's decoded
//     path, without the query): the reading that makes /pkg.Svc/Un%61ry or /pkg.Svc/Unary?x=1 run
//     Unary.
//   - grpc: a grpc-go server with the same two methods (grpc-go splits :path at its last "/" and
//     decodes nothing: an unknown name is 12 UNIMPLEMENTED).
//   - admin (HTTP/1.1): GET /counts answers what reached each server: every request as it arrived
//     (protocol, method, request URI, the decoded path, its x-attack-id) and how many times each method's handler
//     ran; POST /reset forgets it.
//
// Both request and response are google.protobuf.StringValue: no generated code is needed. The
// process exits when its stdin closes, so a test that dies leaves nothing behind.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type seen struct {
	Server string `json:"server"`
	Proto  string `json:"proto"`
	Method string `json:"method"`
	URI    string `json:"uri"`
	Path   string `json:"path"`
	// the request's x-attack-id header: which of the test's requests this was
	ID string `json:"id"`
}

type counts struct {
	mu       sync.Mutex
	Requests []seen         `json:"requests"`
	Handled  map[string]int `json:"handled"`
}

func (c *counts) request(s seen) {
	c.mu.Lock()
	c.Requests = append(c.Requests, s)
	c.mu.Unlock()
}

func (c *counts) handled(server, procedure string) {
	c.mu.Lock()
	c.Handled[server+" "+procedure]++
	c.mu.Unlock()
}

var all = &counts{Requests: []seen{}, Handled: map[string]int{}}

func answer(server, procedure string) func(context.Context, *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
	return func(_ context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		all.handled(server, procedure)
		return connect.NewResponse(wrapperspb.String(procedure + ":" + req.Msg.GetValue())), nil
	}
}

func connectServer() http.Handler {
	unary := connect.NewUnaryHandler("/pkg.Svc/Unary", answer("connect", "/pkg.Svc/Unary"))
	open := connect.NewUnaryHandler("/pkg.Svc/Open", answer("connect", "/pkg.Svc/Open"))
	mux := http.NewServeMux()
	// protoc-gen-connect-go's shape: the service's prefix, then a switch on r.URL.Path
	mux.Handle("/pkg.Svc/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pkg.Svc/Unary":
			unary.ServeHTTP(w, r)
		case "/pkg.Svc/Open":
			open.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		all.request(seen{Server: "connect", Proto: r.Proto, Method: r.Method, URI: r.RequestURI, Path: r.URL.Path, ID: r.Header.Get("x-attack-id")})
		mux.ServeHTTP(w, r)
	})
}

func grpcMethod(name string) grpc.MethodDesc {
	procedure := "/pkg.Svc/" + name
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			all.handled("grpc", procedure)
			return wrapperspb.String(procedure + ":" + in.GetValue()), nil
		},
	}
}

func grpcServer() *grpc.Server {
	s := grpc.NewServer(grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
		id := ""
		if v := info.Header.Get("x-attack-id"); len(v) > 0 {
			id = v[0]
		}
		all.request(seen{Server: "grpc", Proto: "HTTP/2.0", Method: "POST", URI: info.FullMethodName, Path: info.FullMethodName, ID: id})
		return ctx, nil
	}))
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "pkg.Svc",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{grpcMethod("Unary"), grpcMethod("Open")},
	}, struct{}{})
	return s
}

func admin(w http.ResponseWriter, r *http.Request) {
	all.mu.Lock()
	defer all.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/counts":
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(all)
	case r.Method == http.MethodPost && r.URL.Path == "/reset":
		all.Requests = []seen{}
		all.Handled = map[string]int{}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func listen() net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "path-judge:", err)
		os.Exit(1)
	}
	return l
}

func main() {
	cl, gl, al := listen(), listen(), listen()
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	go func() { _ = (&http.Server{Handler: connectServer(), Protocols: protocols}).Serve(cl) }()
	go func() { _ = grpcServer().Serve(gl) }()
	go func() { _ = (&http.Server{Handler: http.HandlerFunc(admin)}).Serve(al) }()
	fmt.Printf("path-judge connect=%s grpc=%s admin=%s\n", cl.Addr(), gl.Addr(), al.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
