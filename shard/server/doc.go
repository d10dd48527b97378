// Package server is a shard replica's gRPC service: it validates every
// request as the router does, against the settings of the collection it
// names, answers searches with the vector kernels over a consistent view
// of that collection's store (exact, int8 or IVF scans, one pass a batch,
// admitted by the scan queue), serves grpc.health.v1 from the node's
// serving state, and turns writes and catalog changes into commands
// proposed through the raft node. Its state machine (NewStateMachine)
// applies committed commands to the replica's Collections (the catalog
// and a store per collection) and writes and restores snapshots.
//
// A write is acknowledged only once committed through the log; the server
// never writes a store directly, and never decides the serving rule
// (raftnode's) or what to do about a failure (the router's).
package server
