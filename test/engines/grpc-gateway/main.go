// The real grpc-gateway as the judge of dojang's JSON transcoding
// (test/behaviour/json-transcoding-gateway.test.ts), and the grpc-go upstream both stand in front
// of. Both are made of code generated at engine build time (scripts/engines.mjs, engine.json's
// "generate") from test/fixtures/transcode/judge.proto by protoc-gen-go, protoc-gen-go-grpc and
// protoc-gen-grpc-gateway v2.34.0: the gateway is the generated handlers registered on
// runtime.NewServeMux with its defaults (RegisterJudgeHandlerFromEndpoint), nothing else.
//
//	grpc-gateway upstream -listen 127.0.0.1:0
//	grpc-gateway gateway  -listen 127.0.0.1:0 -upstream 127.0.0.1:PORT
//	grpc-gateway descriptors
//
// The upstream prints "listening on GRPC_ADDR records on HTTP_ADDR", the gateway "listening on
// ADDR". The upstream keeps what each call received, by the request's From header, as
// protojson (GET http://HTTP_ADDR/received?case=ID answers {"method": ..., "message": ...}, or
// 404 when no call came): the test compares what reached the upstream through each gateway.
// Its methods: each unary method answers with its request; Stream sends `count` copies of
// `item` (ABORTED after them with then_fail); Collect answers how many messages came and their
// f_string; Fail answers the status it is asked for, with details; Reply answers the serialized
// Kinds it is given; Download answers the request's f_string as a text/plain HttpBody.
//
// "descriptors" prints the serialized FileDescriptorProtos of google/rpc/status.proto and
// google/rpc/error_details.proto as the genproto module ships them, one base64 line each:
// the test checks that the copies dojang carries (src/translate/google-rpc.ts) are these.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"dojang.test/engines/grpcgateway/gen"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: grpc-gateway upstream|gateway -listen ADDR [-upstream ADDR]")
	}
	mode := os.Args[1]
	if mode == "descriptors" {
		for _, fd := range []protoreflect.FileDescriptor{spb.File_google_rpc_status_proto, errdetails.File_google_rpc_error_details_proto} {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(protodesc.ToFileDescriptorProto(fd))
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(base64.StdEncoding.EncodeToString(b))
		}
		return
	}
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	upstream := fs.String("upstream", "", "gateway: the gRPC upstream")
	_ = fs.Parse(os.Args[2:])
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	switch mode {
	case "upstream":
		u := &judge{received: map[string]record{}}
		s := grpc.NewServer()
		gen.RegisterJudgeServer(s, u)
		side, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		go func() { log.Fatal(http.Serve(side, http.HandlerFunc(u.serveRecords))) }()
		fmt.Printf("listening on %s records on %s\n", lis.Addr(), side.Addr())
		log.Fatal(s.Serve(lis))
	case "gateway":
		mux := runtime.NewServeMux()
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if err := gen.RegisterJudgeHandlerFromEndpoint(context.Background(), mux, *upstream, opts); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("listening on %s\n", lis.Addr())
		log.Fatal(http.Serve(lis, mux))
	default:
		log.Fatalf("unknown mode %q", mode)
	}
}

// === the upstream ===

type record struct {
	Method  string          `json:"method"`
	Message json.RawMessage `json:"message"`
	// the call's metadata but for gRPC's own and the transport's (":authority", content-type, user-agent)
	Metadata map[string][]string `json:"metadata"`
}

type judge struct {
	gen.UnimplementedJudgeServer
	mu       sync.Mutex
	received map[string]record
}

// keep stores what a call received under its From (calls without one are not kept).
func (j *judge) keep(ctx context.Context, method string, msgs ...proto.Message) {
	md, _ := metadata.FromIncomingContext(ctx)
	// the test's From header: grpc-gateway forwards it (a permanent HTTP header) as
	// grpcgateway-from, dojang as from
	ids := append(md.Get("grpcgateway-from"), md.Get("from")...)
	if len(ids) == 0 {
		return
	}
	parts := make([]json.RawMessage, 0, len(msgs))
	for _, m := range msgs {
		b, err := protojson.Marshal(m)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"marshalError": err.Error()})
		}
		parts = append(parts, b)
	}
	var msg json.RawMessage
	if len(parts) == 1 {
		msg = parts[0]
	} else {
		msg, _ = json.Marshal(parts)
	}
	meta := map[string][]string{}
	for k, v := range md {
		if k != ":authority" && k != "content-type" && k != "user-agent" && !strings.HasPrefix(k, "grpc-") {
			meta[k] = v
		}
	}
	j.mu.Lock()
	j.received[ids[0]] = record{Method: method, Message: msg, Metadata: meta}
	j.mu.Unlock()
	// response metadata, for the test to see how each gateway passes it on
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-judge", method))
}

func (j *judge) serveRecords(w http.ResponseWriter, r *http.Request) {
	j.mu.Lock()
	rec, ok := j.received[r.URL.Query().Get("case")]
	j.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("content-type", "application/json")
	_ = json.NewEncoder(w).Encode(rec)
}

func (j *judge) Echo(ctx context.Context, in *gen.Kinds) (*gen.Kinds, error) {
	j.keep(ctx, "Echo", in)
	return in, nil
}

func (j *judge) Query(ctx context.Context, in *gen.Kinds) (*gen.Kinds, error) {
	j.keep(ctx, "Query", in)
	return in, nil
}

func (j *judge) Path(ctx context.Context, in *gen.Kinds) (*gen.Kinds, error) {
	j.keep(ctx, "Path", in)
	return in, nil
}

func (j *judge) Body(ctx context.Context, in *gen.Kinds) (*gen.Kinds, error) {
	j.keep(ctx, "Body", in)
	return in, nil
}

func (j *judge) Respond(ctx context.Context, in *gen.Kinds) (*gen.Kinds, error) {
	j.keep(ctx, "Respond", in)
	return in, nil
}

func (j *judge) Plain(ctx context.Context, in *gen.Kinds) (*gen.Kinds, error) {
	j.keep(ctx, "Plain", in)
	return in, nil
}

func (j *judge) Update(ctx context.Context, in *gen.UpdateRequest) (*gen.UpdateRequest, error) {
	j.keep(ctx, "Update", in)
	return in, nil
}

func (j *judge) Stream(in *gen.StreamRequest, stream grpc.ServerStreamingServer[gen.Kinds]) error {
	j.keep(stream.Context(), "Stream", in)
	item := in.GetItem()
	if item == nil {
		item = &gen.Kinds{}
	}
	for i := int32(0); i < in.GetCount(); i++ {
		if err := stream.Send(item); err != nil {
			return err
		}
	}
	if in.GetThenFail() {
		return status.Error(codes.Aborted, "stopped after the items")
	}
	return nil
}

func (j *judge) Collect(stream grpc.ClientStreamingServer[gen.Kinds, gen.Kinds]) error {
	var all []proto.Message
	out := &gen.Kinds{}
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		all = append(all, in)
		out.RString = append(out.RString, in.GetFString())
	}
	out.FInt32 = int32(len(all))
	j.keep(stream.Context(), "Collect", all...)
	return stream.SendAndClose(out)
}

func (j *judge) Fail(ctx context.Context, in *gen.FailRequest) (*emptypb.Empty, error) {
	j.keep(ctx, "Fail", in)
	if in.GetCode() == 0 {
		return &emptypb.Empty{}, nil
	}
	s := &spb.Status{Code: in.GetCode(), Message: in.GetMessage()}
	var details []proto.Message
	switch in.GetDetails() {
	case gen.Details_DETAILS_STANDARD:
		details = standardDetails()
	case gen.Details_DETAILS_OWN:
		details = []proto.Message{&gen.Nested{Name: "own", Id: 9007199254740993, Child: &gen.Nested{Tags: []string{"a"}}}}
	case gen.Details_DETAILS_UNKNOWN:
		details = []proto.Message{&errdetails.ErrorInfo{Reason: "KNOWN"}}
		s.Details = append(s.Details, &anypb.Any{TypeUrl: "type.googleapis.com/no.such.v1.Type", Value: []byte{8, 1}})
	}
	for _, d := range details {
		a, err := anypb.New(d)
		if err != nil {
			return nil, err
		}
		s.Details = append(s.Details, a)
	}
	return nil, status.FromProto(s).Err()
}

// standardDetails: one of each message of google/rpc/error_details.proto.
func standardDetails() []proto.Message {
	return []proto.Message{
		&errdetails.ErrorInfo{Reason: "STOCKOUT", Domain: "shop.example", Metadata: map[string]string{"sku": "a-1"}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)},
		&errdetails.DebugInfo{StackEntries: []string{"a", "b"}, Detail: "x"},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "s", Description: "d"}}},
		&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{Type: "TOS", Subject: "s", Description: "d"}}},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "f_int64", Description: "too big", Reason: "RANGE", LocalizedMessage: &errdetails.LocalizedMessage{Locale: "en-US", Message: "too big"}}}},
		&errdetails.RequestInfo{RequestId: "r-1", ServingData: "sd"},
		&errdetails.ResourceInfo{ResourceType: "book", ResourceName: "shelves/1/books/2", Owner: "o", Description: "d"},
		&errdetails.Help{Links: []*errdetails.Help_Link{{Description: "docs", Url: "https://example.com/help"}}},
		&errdetails.LocalizedMessage{Locale: "de-DE", Message: "zu groß"},
	}
}

func (j *judge) Reply(ctx context.Context, in *gen.Raw) (*gen.Kinds, error) {
	j.keep(ctx, "Reply", in)
	out := &gen.Kinds{}
	if err := proto.Unmarshal(in.GetKinds(), out); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "Raw.kinds: %v", err)
	}
	return out, nil
}

func (j *judge) Nothing(ctx context.Context, in *emptypb.Empty) (*emptypb.Empty, error) {
	j.keep(ctx, "Nothing", in)
	return in, nil
}

func (j *judge) Download(ctx context.Context, in *gen.Kinds) (*httpbody.HttpBody, error) {
	j.keep(ctx, "Download", in)
	return &httpbody.HttpBody{ContentType: "text/plain", Data: []byte(in.GetFString())}, nil
}
