// Package shard is the shard protocol both ends share: the gRPC services
// (shardpb), the wire form of vectors (little-endian float32), the
// placement a write is routed under, the reasons a replica refuses a call
// (NOT_LEADER, NOT_SERVING) and the errors the client turns them into,
// the connection and server options DESIGN.md demands of every shard
// connection, TLS loading with reload, and the names of the shard's
// tracing spans.
//
// Its subpackages are the two ends: client (the router's connection to a
// replica) and the replica itself — store (documents and indexes),
// raftnode (replication), raftgrpc (raft over the shard's gRPC port),
// server (the gRPC service and the state machine) and replica (their
// assembly).
//
// The package decides nothing: retrying, failing over, hedging and health
// belong to package fanout, and it never holds replica state.
package shard
