// Package layering holds the test that keeps imports flowing one way, as
// DESIGN.md's Layout draws them: the router side (api, coordinator,
// fanout) never reaches into a replica's server, node, transport or
// store; api knows no gRPC but for the Qdrant gRPC service and its
// generated messages (api/qdrant/qdrantgrpc, qdrantpb), which import no
// shard package either; the store never imports raft, gRPC or the shard
// protocol; fanout
// never imports shard at all; and the pure rules (budget, placement,
// filter) import none of the layers that use them.
//
// It has no code: the rules are in layering_test.go, checked against
// `go list` of the module.
package layering
