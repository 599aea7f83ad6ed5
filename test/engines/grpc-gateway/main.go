// grpc-gateway as the reference for dojang's JSON transcoding (test/behaviour/json-transcoding-gateway.test.ts),
// and a grpc-go upstream for the same test service. No generated code: the descriptor set the
// tests compile (protoc --include_imports) is loaded with protodesc, messages are dynamicpb, and
// each google.api.http rule is served by grpc-gateway's own runtime the way its generated
// handlers do it: the ServeMux and its path templates (HandlePath), runtime.PopulateFieldFromPath
// for path variables, the marshaler's decoder for the body, runtime.PopulateQueryParameters with
// the bound fields filtered out, runtime.ForwardResponseMessage / ForwardResponseStream, and
// runtime.HTTPError for statuses.
//
//	grpc-gateway upstream -descriptor set.binpb -listen 127.0.0.1:0
//	grpc-gateway gateway  -descriptor set.binpb -listen 127.0.0.1:0 -upstream 127.0.0.1:PORT
//
// Each prints "listening on HOST:PORT" once it serves. The upstream answers as
// test/helpers/transcode.ts's grpc-js one: Fail returns the status it is asked for, Stream sends
// `count` copies of `item` (ABORTED after them for an item titled "then-fail"), any other method
// returns its request.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: grpc-gateway upstream|gateway -descriptor FILE -listen ADDR [-upstream ADDR]")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	desc := fs.String("descriptor", "", "FileDescriptorSet (protoc --include_imports)")
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	upstream := fs.String("upstream", "", "gateway: the gRPC upstream")
	_ = fs.Parse(os.Args[2:])
	files := load(*desc)
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	switch mode {
	case "upstream":
		s := grpc.NewServer()
		registerUpstream(s, files)
		fmt.Printf("listening on %s\n", lis.Addr())
		log.Fatal(s.Serve(lis))
	case "gateway":
		conn, err := grpc.NewClient(*upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			log.Fatal(err)
		}
		mux := runtime.NewServeMux()
		registerGateway(mux, files, conn)
		fmt.Printf("listening on %s\n", lis.Addr())
		log.Fatal(http.Serve(lis, mux))
	default:
		log.Fatalf("unknown mode %q", mode)
	}
}

// load reads the descriptor set; its message types are also registered globally so that
// protojson resolves google.protobuf.Any values of the set's own types.
func load(path string) *protoregistry.Files {
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		log.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		log.Fatal(err)
	}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if _, err := protoregistry.GlobalFiles.FindFileByPath(fd.Path()); err == nil {
			return true // linked in already (google/protobuf/*, google/api/*)
		}
		registerTypes(fd.Messages(), fd.Enums())
		return true
	})
	return files
}

func registerTypes(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors) {
	for i := 0; i < es.Len(); i++ {
		_ = protoregistry.GlobalTypes.RegisterEnum(dynamicpb.NewEnumType(es.Get(i)))
	}
	for i := 0; i < ms.Len(); i++ {
		md := ms.Get(i)
		if md.IsMapEntry() {
			continue
		}
		_ = protoregistry.GlobalTypes.RegisterMessage(dynamicpb.NewMessageType(md))
		registerTypes(md.Messages(), md.Enums())
	}
}

func services(files *protoregistry.Files, f func(protoreflect.ServiceDescriptor)) {
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			f(fd.Services().Get(i))
		}
		return true
	})
}

// newMessage makes an empty message of md's type (the registered dynamic type, or a linked one).
func newMessage(md protoreflect.MessageDescriptor) proto.Message {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName()); err == nil {
		return mt.New().Interface()
	}
	return dynamicpb.NewMessage(md)
}

// === the upstream ===

func registerUpstream(s *grpc.Server, files *protoregistry.Files) {
	services(files, func(sd protoreflect.ServiceDescriptor) {
		desc := grpc.ServiceDesc{ServiceName: string(sd.FullName()), HandlerType: (*any)(nil)}
		for i := 0; i < sd.Methods().Len(); i++ {
			md := sd.Methods().Get(i)
			if md.IsStreamingServer() {
				desc.Streams = append(desc.Streams, grpc.StreamDesc{StreamName: string(md.Name()), ServerStreams: true, Handler: streamHandler(md)})
				continue
			}
			desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: string(md.Name()), Handler: unaryHandler(md)})
		}
		s.RegisterService(&desc, struct{}{})
	})
}

func field(m proto.Message, name string) protoreflect.Value {
	r := m.ProtoReflect()
	return r.Get(r.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

func unaryHandler(md protoreflect.MethodDescriptor) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := newMessage(md.Input())
		if err := dec(in); err != nil {
			return nil, err
		}
		if md.Name() == "Fail" {
			return nil, status.Error(codes.Code(field(in, "code").Int()), field(in, "message").String())
		}
		return in, nil
	}
}

func streamHandler(md protoreflect.MethodDescriptor) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		in := newMessage(md.Input())
		if err := stream.RecvMsg(in); err != nil {
			return err
		}
		count := field(in, "count").Int()
		item := field(in, "item").Message().Interface()
		for i := int64(0); i < count; i++ {
			if err := stream.SendMsg(item); err != nil {
				return err
			}
		}
		if field(item, "title").String() == "then-fail" {
			return status.Error(codes.Aborted, "stopped after the items")
		}
		return nil
	}
}

// === the gateway ===

func registerGateway(mux *runtime.ServeMux, files *protoregistry.Files, conn *grpc.ClientConn) {
	services(files, func(sd protoreflect.ServiceDescriptor) {
		for i := 0; i < sd.Methods().Len(); i++ {
			md := sd.Methods().Get(i)
			rule, ok := proto.GetExtension(md.Options(), annotations.E_Http).(*annotations.HttpRule)
			if !ok || rule == nil || md.IsStreamingClient() {
				continue
			}
			for _, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
				method, pattern := ruleMethod(r)
				if err := mux.HandlePath(method, pattern, handler(mux, conn, sd, md, r, pattern)); err != nil {
					log.Fatalf("%s %s: %v", method, pattern, err)
				}
			}
		}
	})
}

func ruleMethod(r *annotations.HttpRule) (string, string) {
	switch p := r.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		return "GET", p.Get
	case *annotations.HttpRule_Put:
		return "PUT", p.Put
	case *annotations.HttpRule_Post:
		return "POST", p.Post
	case *annotations.HttpRule_Delete:
		return "DELETE", p.Delete
	case *annotations.HttpRule_Patch:
		return "PATCH", p.Patch
	case *annotations.HttpRule_Custom:
		return p.Custom.GetKind(), p.Custom.GetPath()
	}
	log.Fatalf("unknown pattern %v", r)
	return "", ""
}

func handler(mux *runtime.ServeMux, conn *grpc.ClientConn, sd protoreflect.ServiceDescriptor, md protoreflect.MethodDescriptor, r *annotations.HttpRule, pattern string) runtime.HandlerFunc {
	fullMethod := fmt.Sprintf("/%s/%s", sd.FullName(), md.Name())
	return func(w http.ResponseWriter, req *http.Request, pathParams map[string]string) {
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		inbound, outbound := runtime.MarshalerForRequest(mux, req)
		ctx, err := runtime.AnnotateContext(ctx, mux, req, fullMethod, runtime.WithHTTPPathPattern(pattern))
		if err != nil {
			runtime.HTTPError(ctx, mux, outbound, w, req, err)
			return
		}
		in, err := requestMessage(inbound, req, md, r, pathParams)
		if err != nil {
			runtime.HTTPError(ctx, mux, outbound, w, req, err)
			return
		}
		var meta runtime.ServerMetadata
		if md.IsStreamingServer() {
			stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, fullMethod)
			if err == nil {
				err = stream.SendMsg(in)
			}
			if err == nil {
				err = stream.CloseSend()
			}
			if err == nil {
				meta.HeaderMD, err = stream.Header()
			}
			if err != nil {
				runtime.HTTPError(ctx, mux, outbound, w, req, err)
				return
			}
			ctx = runtime.NewServerMetadataContext(ctx, meta)
			runtime.ForwardResponseStream(ctx, mux, outbound, w, req, func() (proto.Message, error) {
				out := newMessage(md.Output())
				if err := stream.RecvMsg(out); err != nil {
					return nil, err
				}
				return out, nil
			}, mux.GetForwardResponseOptions()...)
			return
		}
		out := newMessage(md.Output())
		err = conn.Invoke(ctx, fullMethod, in, out, grpc.Header(&meta.HeaderMD), grpc.Trailer(&meta.TrailerMD))
		ctx = runtime.NewServerMetadataContext(ctx, meta)
		if err != nil {
			runtime.HTTPError(ctx, mux, outbound, w, req, err)
			return
		}
		runtime.ForwardResponseMessage(ctx, mux, outbound, w, req, out, mux.GetForwardResponseOptions()...)
	}
}

// requestMessage builds the request as protoc-gen-grpc-gateway's generated request_* functions do:
// the body first (the whole message, or one field), then the path's variables, then the query
// for what neither set.
func requestMessage(m runtime.Marshaler, req *http.Request, md protoreflect.MethodDescriptor, r *annotations.HttpRule, pathParams map[string]string) (proto.Message, error) {
	in := newMessage(md.Input())
	var bound [][]string
	switch body := r.GetBody(); body {
	case "":
	case "*":
		if err := m.NewDecoder(req.Body).Decode(in); err != nil && !errors.Is(err, io.EOF) {
			return nil, status.Errorf(codes.InvalidArgument, "%v", err)
		}
	default:
		// (the generated code decodes into the field's pointer: an empty body leaves it unset)
		fd := md.Input().Fields().ByName(protoreflect.Name(body))
		target := newMessage(fd.Message())
		err := m.NewDecoder(req.Body).Decode(target)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, status.Errorf(codes.InvalidArgument, "%v", err)
		}
		if err == nil {
			in.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(target.ProtoReflect()))
		}
		bound = append(bound, []string{body})
	}
	for name, val := range pathParams {
		if err := runtime.PopulateFieldFromPath(in, name, val); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "type mismatch, parameter: %s, error: %v", name, err)
		}
		bound = append(bound, strings.Split(name, "."))
	}
	if r.GetBody() != "*" {
		if err := req.ParseForm(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%v", err)
		}
		if err := runtime.PopulateQueryParameters(in, req.Form, utilities.NewDoubleArray(bound)); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%v", err)
		}
	}
	return in, nil
}
