// A test-only xDS control plane for dojang's xDS tests: go-control-plane's SnapshotCache (ADS,
// keyed by node id) served by its own server.NewServer, plus a small local HTTP endpoint through
// which a test scripts what is served and reads what dojang answered.
//
//	POST /snapshot {"node": "id", "version": "v1", "consistent": true,
//	                "resources": {"<type_url>": [<resource in protojson>, ...]}}
//	GET  /events?since=N   every DiscoveryRequest and DeltaDiscoveryRequest seen (ACKs, NACKs with
//	                       error_detail), stream opens and closes
//
// Prints "ads=<port> http=<port>" on stdout once both listen.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"

	// the resource types and the typed_config extensions a test may write, registered for protojson
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

type event struct {
	Seq           int          `json:"seq"`
	Kind          string       `json:"kind"` // request | open | closed
	Stream        int64        `json:"stream"`
	Node          string       `json:"node,omitempty"`
	TypeURL       string       `json:"typeUrl,omitempty"`
	Version       string       `json:"version,omitempty"`
	Nonce         string       `json:"nonce,omitempty"`
	ResourceNames []string     `json:"resourceNames,omitempty"`
	ErrorDetail   *errorDetail `json:"errorDetail,omitempty"`
}

type errorDetail struct {
	Code    int32  `json:"code"`
	Message string `json:"message"`
}

type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Seq = len(r.events)
	r.events = append(r.events, e)
}

func (r *recorder) since(n int) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < 0 || n > len(r.events) {
		n = len(r.events)
	}
	return append([]event{}, r.events[n:]...)
}

type snapshotBody struct {
	Node       string                       `json:"node"`
	Version    string                       `json:"version"`
	Consistent bool                         `json:"consistent"`
	Resources  map[string][]json.RawMessage `json:"resources"`
}

func main() {
	adsPort := flag.Int("ads-port", 0, "port of the ADS gRPC server (0: any free port)")
	httpPort := flag.Int("http-port", 0, "port of the test's HTTP endpoint (0: any free port)")
	flag.Parse()

	ctx := context.Background()
	snapshots := cache.NewSnapshotCache(true, cache.IDHash{}, nil)
	rec := &recorder{}
	cb := server.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			rec.add(event{Kind: "open", Stream: id})
			return nil
		},
		StreamClosedFunc: func(id int64, node *core.Node) {
			rec.add(event{Kind: "closed", Stream: id, Node: node.GetId()})
		},
		StreamDeltaRequestFunc: func(id int64, req *discoverygrpc.DeltaDiscoveryRequest) error {
			e := event{Kind: "delta", Stream: id, Node: req.GetNode().GetId(), TypeURL: req.GetTypeUrl(), Nonce: req.GetResponseNonce(), ResourceNames: req.GetResourceNamesSubscribe()}
			if d := req.GetErrorDetail(); d != nil {
				e.ErrorDetail = &errorDetail{Code: d.GetCode(), Message: d.GetMessage()}
			}
			rec.add(e)
			return nil
		},
		StreamRequestFunc: func(id int64, req *discoverygrpc.DiscoveryRequest) error {
			e := event{Kind: "request", Stream: id, Node: req.GetNode().GetId(), TypeURL: req.GetTypeUrl(), Version: req.GetVersionInfo(), Nonce: req.GetResponseNonce(), ResourceNames: req.GetResourceNames()}
			if d := req.GetErrorDetail(); d != nil {
				e.ErrorDetail = &errorDetail{Code: d.GetCode(), Message: d.GetMessage()}
			}
			rec.add(e)
			return nil
		},
	}
	srv := server.NewServer(ctx, snapshots, cb)
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, srv)

	adsLn, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*adsPort))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ads listen:", err)
		os.Exit(1)
	}
	httpLn, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*httpPort))
	if err != nil {
		fmt.Fprintln(os.Stderr, "http listen:", err)
		os.Exit(1)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /snapshot", func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body snapshotBody
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		res := map[string][]types.Resource{}
		for typeURL, list := range body.Resources {
			mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
			if err != nil {
				http.Error(w, "type "+typeURL+": "+err.Error(), http.StatusBadRequest)
				return
			}
			res[typeURL] = []types.Resource{}
			for i, item := range list {
				m := mt.New().Interface()
				if err := protojson.Unmarshal(item, m); err != nil {
					http.Error(w, fmt.Sprintf("%s[%d]: %v", typeURL, i, err), http.StatusBadRequest)
					return
				}
				res[typeURL] = append(res[typeURL], m.(proto.Message))
			}
		}
		snap, err := cache.NewSnapshot(body.Version, res)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if body.Consistent {
			if err := snap.Consistent(); err != nil {
				http.Error(w, "inconsistent: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		if err := snapshots.SetSnapshot(ctx, body.Node, snap); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("since"))
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(rec.since(n))
	})

	go func() { _ = g.Serve(adsLn) }()
	go func() { _ = http.Serve(httpLn, mux) }()
	fmt.Printf("ads=%d http=%d\n", adsLn.Addr().(*net.TCPAddr).Port, httpLn.Addr().(*net.TCPAddr).Port)
	select {}
}
