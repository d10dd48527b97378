// Package server is a shard replica's gRPC service: it validates every
// request as the router does, answers searches with the vector kernels
// over a consistent view of the store (exact, int8 or IVF scans, one pass
// a batch, admitted by the scan queue), serves grpc.health.v1 from the
// node's serving state, and turns writes into commands proposed through
// the raft node. Its state machine (NewStateMachine) applies committed
// commands to the store and writes and restores snapshots.
//
// A write is acknowledged only once committed through the log; the server
// never writes the store directly, and never decides the serving rule
// (raftnode's) or what to do about a failure (the router's).
package server
