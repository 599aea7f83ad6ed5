// otelsink: a real OTLP trace receiver (the OpenTelemetry Collector's own otlpreceiver component,
// gRPC and HTTP) feeding an in-memory store, with a small HTTP API the tests read the received
// spans from, as a trace backend's query API would show them:
//
//	GET /api/traces/<32 hex digits>  the trace's spans as OTLP JSON (ptrace's JSON encoding)
//	GET /api/spans                   how many spans were received in all ({"spans": n})
//
// Usage: otelsink -grpc 127.0.0.1:PORT -http 127.0.0.1:PORT -api 127.0.0.1:PORT
// Prints "otelsink ready" on stdout once all three listen. Test-only.
//
// Or otelsink -decode protobuf|json: reads one OTLP/HTTP export body (ExportTraceServiceRequest)
// on stdin and prints it as ptrace's JSON, decoded by the collector's own unmarshaler (the one
// its OTLP receiver runs for that content type). A protobuf body is also decoded by the official
// Go bindings of opentelemetry-proto (go.opentelemetry.io/proto/otlp, generated from the .proto
// files) and refused if any message in it holds a field those definitions do not know: a wrong
// field number or wire type cannot pass unseen. Exit 1 with the reason on stderr otherwise.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
	decode := flag.String("decode", "", "decode one export body from stdin: protobuf or json")
	flag.Parse()
	if *decode != "" {
		decodeStdin(*decode)
		return
	}

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

func decodeStdin(format string) {
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var td ptrace.Traces
	switch format {
	case "protobuf":
		var req coltracepb.ExportTraceServiceRequest
		if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(body, &req); err != nil {
			fail(fmt.Errorf("official bindings: %w", err))
		}
		if where := unknownFields(req.ProtoReflect(), "ExportTraceServiceRequest"); where != "" {
			fail(fmt.Errorf("official bindings: unknown fields in %s", where))
		}
		td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	case "json":
		td, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
	default:
		err = fmt.Errorf("-decode %q: protobuf or json", format)
	}
	if err != nil {
		fail(fmt.Errorf("collector: %w", err))
	}
	out, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		fail(err)
	}
	_, _ = os.Stdout.Write(out)
}

// unknownFields names the first message (by path) holding bytes its definition does not know.
func unknownFields(m protoreflect.Message, path string) string {
	if len(m.GetUnknown()) > 0 {
		return path
	}
	where := ""
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil {
			return true
		}
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && where == ""; i++ {
				where = unknownFields(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.IsMap():
		default:
			where = unknownFields(v.Message(), p)
		}
		return where == ""
	})
	return where
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "otelsink:", err)
	os.Exit(1)
}
