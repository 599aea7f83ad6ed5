// connect-go's client (connectrpc.com/connect) calling one procedure through dojang:
//   - -protocol grpc (the default): the gRPC protocol (connect.WithGRPC) over h2c, with its JSON
//     codec (application/grpc+json) or proto: the judge of what a client of a gRPC content-type
//     subtype reads from a status dojang writes itself (test/behaviour/grpc-subtype.test.ts).
//     connect-go checks that a reply's content-type names the codec it asked for; one of plain
//     application/grpc it reads as 13 INTERNAL.
//   - -protocol connect: the Connect protocol (unary: application/proto or application/json) over
//     HTTP/1.1, as a browser or curl-shaped client sends it: the judge of a Connect answer dojang
//     writes itself (test/behaviour/one-way-in.test.ts, the overload refusal).
//
//	connect-go-client -url http://127.0.0.1:PORT -procedure /pkg.Svc/Method [-codec json|proto]
//	    [-protocol grpc|connect] [-timeout 200ms] [-n 1]
//
// Sends a google.protobuf.StringValue "ping" n times (one after another, on one connection) and
// prints one JSON line per call: {"code":N,"message":"...","contentType":"..."} (code 0 for OK).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type result struct {
	Code        int    `json:"code"`
	Message     string `json:"message"`
	ContentType string `json:"contentType"`
}

func main() {
	url := flag.String("url", "", "dojang's address, http://host:port")
	procedure := flag.String("procedure", "/test.Echo/Unary", "the procedure to call")
	codec := flag.String("codec", "json", "json (application/grpc+json) or proto (application/grpc)")
	protocol := flag.String("protocol", "grpc", "grpc (over h2c) or connect (over HTTP/1.1)")
	timeout := flag.Duration("timeout", 0, "the call's deadline (0: none)")
	n := flag.Int("n", 1, "calls, one after another")
	flag.Parse()
	// h2c: HTTP/2 with prior knowledge over plain TCP, as a gRPC client speaks to dojang's listener.
	protocols := new(http.Protocols)
	if *protocol == "connect" {
		protocols.SetHTTP1(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	seen := ""
	transport := &http.Transport{
		Protocols:   protocols,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	client := &http.Client{Transport: roundTripper{transport, &seen}}
	opts := []connect.ClientOption{}
	if *protocol != "connect" {
		opts = append(opts, connect.WithGRPC())
	}
	if *codec == "json" {
		opts = append(opts, connect.WithProtoJSON())
	}
	c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](client, *url+*procedure, opts...)
	enc := json.NewEncoder(os.Stdout)
	for i := 0; i < *n; i++ {
		ctx := context.Background()
		cancel := context.CancelFunc(func() {})
		if *timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, *timeout)
		}
		seen = ""
		_, err := c.CallUnary(ctx, connect.NewRequest(wrapperspb.String("ping")))
		cancel()
		r := result{ContentType: seen}
		if err != nil {
			var ce *connect.Error
			if errors.As(err, &ce) {
				r.Code = int(ce.Code())
				r.Message = ce.Message()
			} else {
				r.Code = -1
				r.Message = err.Error()
			}
		}
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// roundTripper notes the content-type of each response, as it came.
type roundTripper struct {
	next *http.Transport
	seen *string
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err == nil {
		*t.seen = res.Header.Get("Content-Type")
	}
	return res, err
}
