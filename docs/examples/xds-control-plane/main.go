// A small xDS control plane that serves what a YAML or JSON file says, to drive dojang (or Envoy)
// without Kubernetes: go-control-plane's SnapshotCache served over ADS (state of the world and
// incremental, on one gRPC port), one snapshot per node id, read again whenever the file changes.
// It logs every request it gets (stream, node id, type URL, version, nonce, and a NACK's error)
// and every response it sends, so you can see what a data plane asked for and what it accepted.
//
//	go run .                                      serves snapshot.yaml on 127.0.0.1:18000
//	go run . -file my.yaml -addr 0.0.0.0:18000    another file, every interface
//	go run . -log json                            one JSON object per log line
//
// The file (snapshot.yaml beside this one is a working example):
//
//	nodes:
//	  <node id>:               the data plane's bootstrap node.id
//	    version: "1"           optional; without it, a digest of the node's resources
//	    listeners: [...]       envoy.config.listener.v3.Listener
//	    routes: [...]          envoy.config.route.v3.RouteConfiguration
//	    clusters: [...]        envoy.config.cluster.v3.Cluster
//	    endpoints: [...]       envoy.config.endpoint.v3.ClusterLoadAssignment
//
// Each resource is written as in Envoy's own config: the proto3 JSON mapping (snake_case or
// lowerCamelCase field names, durations as "2s", "@type" inside typed_config), in YAML or JSON.
// A file that cannot be read or decoded changes nothing that is served. A snapshot that is not
// consistent (a route names a cluster that is not there, an EDS cluster without endpoints) or a
// resource Envoy's validation rules refuse is logged and served anyway: the data plane's answer
// (ACK or NACK) is what this program is for.
//
// dojang's guide walks through it (docs/guides/xds.md); dojang's xDS tests run this same program
// (scripts/engines.mjs builds it), driving it by writing the file.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"

	// the extensions a typed_config in the file may name ("@type"), registered for protojson
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	_ "google.golang.org/protobuf/types/known/emptypb"
)

// kinds: the file's keys, in the order a snapshot is checked, with their xDS type.
var kinds = []struct {
	key     string
	typeURL resource.Type
	newMsg  func() proto.Message
}{
	{"listeners", resource.ListenerType, func() proto.Message { return &listenerv3.Listener{} }},
	{"routes", resource.RouteType, func() proto.Message { return &routev3.RouteConfiguration{} }},
	{"clusters", resource.ClusterType, func() proto.Message { return &clusterv3.Cluster{} }},
	{"endpoints", resource.EndpointType, func() proto.Message { return &endpointv3.ClusterLoadAssignment{} }},
}

type fileShape struct {
	Nodes map[string]json.RawMessage `json:"nodes"`
}

type nodeShape struct {
	Version   json.RawMessage   `json:"version"`
	Listeners []json.RawMessage `json:"listeners"`
	Routes    []json.RawMessage `json:"routes"`
	Clusters  []json.RawMessage `json:"clusters"`
	Endpoints []json.RawMessage `json:"endpoints"`
}

func (n *nodeShape) list(key string) []json.RawMessage {
	switch key {
	case "listeners":
		return n.Listeners
	case "routes":
		return n.Routes
	case "clusters":
		return n.Clusters
	default:
		return n.Endpoints
	}
}

// node: one node id's snapshot as read from the file.
type node struct {
	version  string
	digest   string
	snapshot *cache.Snapshot
	counts   []any
	warnings []string
	// consistent: go-control-plane's Snapshot.Consistent() passed (every RDS and EDS name a
	// listener or cluster refers to is there, and nothing else)
	consistent bool
}

// strictDecode: JSON into v, refusing keys the shape does not have (a typo is an error, not a no-op).
func strictDecode(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// parseFile reads the whole file; any error refuses all of it (what is served stays).
func parseFile(data []byte) (map[string]*node, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var f fileShape
	if err := strictDecode(js, &f); err != nil {
		return nil, fmt.Errorf("the file: %w (the top level has one key, nodes)", err)
	}
	out := map[string]*node{}
	for id, raw := range f.Nodes {
		n, err := parseNode(id, raw)
		if err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, nil
}

func parseNode(id string, raw json.RawMessage) (*node, error) {
	at := fmt.Sprintf("nodes[%q]", id)
	var s nodeShape
	if err := strictDecode(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: %w (keys: version, listeners, routes, clusters, endpoints)", at, err)
	}
	res := map[resource.Type][]types.Resource{}
	n := &node{}
	h := sha256.New()
	for _, k := range kinds {
		for i, item := range s.list(k.key) {
			m := k.newMsg()
			if err := protojson.Unmarshal(item, m); err != nil {
				return nil, fmt.Errorf("%s.%s[%d]: %w", at, k.key, i, err)
			}
			// Envoy's own validation rules (protoc-gen-validate): reported, not enforced, so a test
			// can see how the data plane answers what Envoy would refuse
			if v, ok := m.(interface{ ValidateAll() error }); ok {
				if err := v.ValidateAll(); err != nil {
					n.warnings = append(n.warnings, fmt.Sprintf("%s.%s[%d]: %v", at, k.key, i, err))
				}
			}
			res[k.typeURL] = append(res[k.typeURL], m)
			fmt.Fprintf(h, "%s %d %s\n", k.key, len(item), item)
		}
		n.counts = append(n.counts, k.key, len(s.list(k.key)))
	}
	n.digest = hex.EncodeToString(h.Sum(nil))[:12]
	switch v := strings.TrimSpace(string(s.Version)); {
	case v == "" || v == "null":
		n.version = n.digest
	case strings.HasPrefix(v, `"`):
		if err := json.Unmarshal(s.Version, &n.version); err != nil {
			return nil, fmt.Errorf("%s.version: %w", at, err)
		}
	default:
		n.version = v // a number, as written
	}
	snap, err := cache.NewSnapshot(n.version, res)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	n.consistent = true
	if err := snap.Consistent(); err != nil {
		n.consistent = false
		n.warnings = append(n.warnings, fmt.Sprintf("%s is not consistent: %v", at, err))
	}
	n.snapshot = snap
	return n, nil
}

// controlPlane: the cache, what the file last gave, and which streams were told about a node id
// the file does not have.
type controlPlane struct {
	path  string
	log   *slog.Logger
	cache cache.SnapshotCache
	// loading: one load at a time (last, and the snapshots set, in file order)
	loading sync.Mutex
	last    []byte
	// mu: served and told, read by the gRPC callbacks; never held while the cache is called
	mu     sync.Mutex
	served map[string]*node
	told   map[int64]bool
}

func (cp *controlPlane) servedNode(id string) *node {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.served[id]
}

// load reads the file and serves what changed; called at start and on every change.
func (cp *controlPlane) load() {
	cp.loading.Lock()
	defer cp.loading.Unlock()
	data, err := os.ReadFile(cp.path)
	if err != nil {
		cp.log.Error("cannot read the file; what is served stays as it was", "file", cp.path, "err", err)
		return
	}
	if cp.last != nil && bytes.Equal(data, cp.last) {
		return
	}
	cp.last = data
	nodes, err := parseFile(data)
	if err != nil {
		cp.log.Error("the file is refused; what is served stays as it was", "file", cp.path, "err", err)
		return
	}
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := nodes[id]
		prev := cp.servedNode(id)
		if prev != nil && prev.digest == n.digest && prev.version == n.version {
			continue
		}
		for _, w := range n.warnings {
			cp.log.Warn("served anyway", "node", id, "version", n.version, "problem", w)
		}
		if prev != nil && prev.version == n.version {
			cp.log.Warn("the resources changed but the version did not: a data plane that has this version is not sent them; change version", "node", id, "version", n.version)
		}
		if err := cp.cache.SetSnapshot(context.Background(), id, n.snapshot); err != nil {
			cp.log.Error("cannot serve the node", "node", id, "err", err)
			continue
		}
		cp.mu.Lock()
		cp.served[id] = n
		cp.mu.Unlock()
		cp.log.Info("serving", append([]any{"node", id, "version", n.version, "consistent", n.consistent}, n.counts...)...)
	}
	cp.mu.Lock()
	var gone []string
	for id := range cp.served {
		if _, ok := nodes[id]; !ok {
			gone = append(gone, id)
			delete(cp.served, id)
		}
	}
	cp.mu.Unlock()
	sort.Strings(gone)
	for _, id := range gone {
		cp.cache.ClearSnapshot(id)
		cp.log.Info("node removed from the file: nothing more is sent to it (what it has, it keeps)", "node", id)
	}
}

// checkNode warns once per stream when a data plane asks with a node id the file does not have:
// go-control-plane then answers nothing, and the data plane waits.
func (cp *controlPlane) checkNode(stream int64, id string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.told[stream] {
		return
	}
	if _, ok := cp.served[id]; ok {
		return
	}
	cp.told[stream] = true
	known := make([]string, 0, len(cp.served))
	for k := range cp.served {
		known = append(known, k)
	}
	sort.Strings(known)
	cp.log.Warn("no snapshot for this node id: nothing is sent until the file has it", "stream", stream, "node", id, "file", cp.path, "nodes in the file", known)
}

func (cp *controlPlane) forget(stream int64) {
	cp.mu.Lock()
	delete(cp.told, stream)
	cp.mu.Unlock()
}

// watch reloads on any change in the file's directory (an editor's rename, a Kubernetes ConfigMap's
// symlink swap), a few milliseconds after the last event so a file being written is read whole.
func (cp *controlPlane) watch() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(cp.path)); err != nil {
		return err
	}
	go func() {
		var mu sync.Mutex
		var t *time.Timer
		for {
			select {
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				mu.Lock()
				if t == nil {
					t = time.AfterFunc(20*time.Millisecond, cp.load)
				} else {
					t.Reset(20 * time.Millisecond)
				}
				mu.Unlock()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				cp.log.Error("watching the file", "err", err)
			}
		}
	}()
	return nil
}

func main() {
	file := flag.String("file", "snapshot.yaml", "the YAML or JSON file to serve (read again when it changes)")
	addr := flag.String("addr", "127.0.0.1:18000", "where the ADS gRPC server listens (port 0: any free port)")
	format := flag.String("log", "text", "log format: text or json (one object per line)")
	flag.Parse()

	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if *format == "json" {
		h = slog.NewJSONHandler(os.Stderr, nil)
	} else if *format != "text" {
		fmt.Fprintln(os.Stderr, "-log: text or json")
		os.Exit(2)
	}
	log := slog.New(h)
	path, err := filepath.Abs(*file)
	if err != nil {
		log.Error("the file's path", "err", err)
		os.Exit(1)
	}

	// IDHash: a snapshot per node.id, as Envoy's and dojang's bootstraps name themselves
	cp := &controlPlane{path: path, log: log, cache: cache.NewSnapshotCache(true, cache.IDHash{}, nil), served: map[string]*node{}, told: map[int64]bool{}}
	cp.load()
	if err := cp.watch(); err != nil {
		log.Error("cannot watch the file's directory", "file", path, "err", err)
		os.Exit(1)
	}

	peerOf := func(ctx context.Context) string {
		if p, ok := peer.FromContext(ctx); ok {
			return p.Addr.String()
		}
		return ""
	}
	cb := server.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, id int64, _ string) error {
			log.Info("stream opened", "stream", id, "peer", peerOf(ctx), "delta", false)
			return nil
		},
		DeltaStreamOpenFunc: func(ctx context.Context, id int64, _ string) error {
			log.Info("stream opened", "stream", id, "peer", peerOf(ctx), "delta", true)
			return nil
		},
		StreamClosedFunc: func(id int64, n *core.Node) {
			cp.forget(id)
			log.Info("stream closed", "stream", id, "node", n.GetId())
		},
		DeltaStreamClosedFunc: func(id int64, n *core.Node) {
			cp.forget(id)
			log.Info("stream closed", "stream", id, "node", n.GetId())
		},
		// go-control-plane puts the stream's node on every request (only the first one carries it)
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			a := []any{"stream", id, "node", req.GetNode().GetId(), "type", req.GetTypeUrl(), "version", req.GetVersionInfo(), "nonce", req.GetResponseNonce(), "names", req.GetResourceNames()}
			if d := req.GetErrorDetail(); d != nil {
				log.Warn("NACK", append(a, "code", d.GetCode(), "error", d.GetMessage())...)
			} else {
				log.Info("request", a...)
			}
			cp.checkNode(id, req.GetNode().GetId())
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, req *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
			log.Info("response", "stream", id, "node", req.GetNode().GetId(), "type", resp.GetTypeUrl(), "version", resp.GetVersionInfo(), "nonce", resp.GetNonce(), "resources", len(resp.GetResources()))
		},
		StreamDeltaRequestFunc: func(id int64, req *discovery.DeltaDiscoveryRequest) error {
			a := []any{"stream", id, "node", req.GetNode().GetId(), "type", req.GetTypeUrl(), "nonce", req.GetResponseNonce(), "subscribe", req.GetResourceNamesSubscribe(), "unsubscribe", req.GetResourceNamesUnsubscribe(), "initial", req.GetInitialResourceVersions()}
			if d := req.GetErrorDetail(); d != nil {
				log.Warn("delta NACK", append(a, "code", d.GetCode(), "error", d.GetMessage())...)
			} else {
				log.Info("delta request", a...)
			}
			cp.checkNode(id, req.GetNode().GetId())
			return nil
		},
		StreamDeltaResponseFunc: func(id int64, req *discovery.DeltaDiscoveryRequest, resp *discovery.DeltaDiscoveryResponse) {
			log.Info("delta response", "stream", id, "node", req.GetNode().GetId(), "type", resp.GetTypeUrl(), "version", resp.GetSystemVersionInfo(), "nonce", resp.GetNonce(), "resources", len(resp.GetResources()), "removed", resp.GetRemovedResources())
		},
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := server.NewServer(ctx, cp.cache, cb)
	// Data planes ping every 30 s or so while the stream is quiet (dojang, Envoy, gRPC clients):
	// allow it, or grpc-go's default policy (one ping per 5 min) closes their streams with GOAWAY.
	g := grpc.NewServer(
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
	)
	discovery.RegisterAggregatedDiscoveryServiceServer(g, srv)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Error("cannot listen", "addr", *addr, "err", err)
		os.Exit(1)
	}
	log.Info("ADS server listening", "addr", ln.Addr().String(), "file", path)
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		log.Error("serving", "err", err)
		os.Exit(1)
	}
}
