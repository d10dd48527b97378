module github.com/trawl-search/trawl/test/compat/go

go 1.26.0

require (
	github.com/qdrant/go-client v1.17.1
	google.golang.org/grpc v1.78.0
)

require (
	golang.org/x/net v0.50.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/text v0.34.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260209200024-4cfbd4190f57 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
