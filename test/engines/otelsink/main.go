// otelsink: a real OTLP trace receiver (the OpenTelemetry Collector's own otlpreceiver component,
// gRPC and HTTP) feeding an in-memory store, with a small HTTP API the tests read the received
// spans from, as a trace backend's query API would show them:
//
//	GET /api/traces/<32 hex digits>  the trace's spans as OTLP JSON (ptrace's JSON encoding)
//	GET /api/spans                   how many spans were received in all ({"spans": n})
//
// Usage: otelsink -grpc 127.0.0.1:PORT -http 127.0.0.1:PORT -api 127.0.0.1:PORT
// Prints "otelsink ready" on stdout once all three listen. Test-only.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
)

type store struct {
	mu     sync.Mutex
	traces []ptrace.Traces
	spans  int
}

func (s *store) consume(_ context.Context, td ptrace.Traces) error {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	s.mu.Lock()
	s.traces = append(s.traces, c)
	s.spans += td.SpanCount()
	s.mu.Unlock()
	return nil
}

// trace gathers the spans of one trace id from every batch received, keeping their resources.
func (s *store) trace(id [16]byte) ptrace.Traces {
	out := ptrace.NewTraces()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, td := range s.traces {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			var dst ptrace.ResourceSpans
			have := false
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				ss := sss.At(j)
				var dss ptrace.ScopeSpans
				haveScope := false
				spans := ss.Spans()
				for k := 0; k < spans.Len(); k++ {
					sp := spans.At(k)
					if [16]byte(sp.TraceID()) != id {
						continue
					}
					if !have {
						dst = out.ResourceSpans().AppendEmpty()
						rs.Resource().CopyTo(dst.Resource())
						have = true
					}
					if !haveScope {
						dss = dst.ScopeSpans().AppendEmpty()
						ss.Scope().CopyTo(dss.Scope())
						haveScope = true
					}
					sp.CopyTo(dss.Spans().AppendEmpty())
				}
			}
		}
	}
	return out
}

func main() {
	grpcAddr := flag.String("grpc", "127.0.0.1:4317", "OTLP/gRPC address")
	httpAddr := flag.String("http", "127.0.0.1:4318", "OTLP/HTTP address")
	apiAddr := flag.String("api", "127.0.0.1:16686", "query API address")
	flag.Parse()

	s := &store{}
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = *grpcAddr
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = *httpAddr
	next, err := consumer.NewTraces(s.consume)
	if err != nil {
		fail(err)
	}
	set := receiver.Settings{ID: component.NewID(factory.Type()), TelemetrySettings: componenttest.NewNopTelemetrySettings(), BuildInfo: component.NewDefaultBuildInfo()}
	ctx := context.Background()
	r, err := factory.CreateTraces(ctx, set, cfg, next)
	if err != nil {
		fail(err)
	}
	if err := r.Start(ctx, componenttest.NewNopHost()); err != nil {
		fail(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/api/traces/", func(w http.ResponseWriter, req *http.Request) {
		raw, err := hex.DecodeString(strings.TrimPrefix(req.URL.Path, "/api/traces/"))
		if err != nil || len(raw) != 16 {
			http.Error(w, "trace id: 32 hex digits", http.StatusBadRequest)
			return
		}
		body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(s.trace([16]byte(raw)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/api/spans", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		n := s.spans
		s.mu.Unlock()
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"spans": n})
	})
	ln, err := net.Listen("tcp", *apiAddr)
	if err != nil {
		fail(err)
	}
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Println("otelsink ready")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	_ = r.Shutdown(ctx)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "otelsink:", err)
	os.Exit(1)
}
