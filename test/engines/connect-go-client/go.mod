module dojang.test/engines/connect-go-client

go 1.26.0

require (
	connectrpc.com/connect v1.19.2
	google.golang.org/protobuf v1.36.9
)
