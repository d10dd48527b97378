// Package shard is both ends of the shard protocol.
//
// Server side: a Server holds one replica's vectors in a Store (one
// 64-byte-aligned arena of float32 rows), answers exact top-k searches with
// the vector kernels, and serves grpc.health.v1 so routers can probe it.
//
// Replication: a Node makes the replica one member of its shard's raft
// group (hashicorp/raft; node.go says why). Writes are commands in the
// replicated log (shardpb/raft.proto), committed on a majority's fsync'd
// raft-boltdb log before the leader answers; the state machine (fsm.go)
// applies them to the Memory store on every replica in the same order, and
// snapshots stream the store from a copy-on-write view. Raft traffic is a
// gRPC service on the shard's own port (transport.go), so the shard's TLS
// and mTLS cover it. A replica serves reads only while it is caught up
// with a leader it has heard from recently (Node.monitor); otherwise reads
// are refused with reason NOT_SERVING, and writes on a follower with
// NOT_LEADER naming the leader (errors.go).
//
// Client side: Dial opens the router's connection to one replica with the
// settings DESIGN.md demands of every shard connection (keepalive while
// idle, TCP keepalive, connect timeout, capped reconnect backoff, no idle
// timeout, optional TLS), and Conn carries every RPC under a deadline.
// Conn turns NOT_LEADER and NOT_SERVING answers into errors with the
// NeverSent/Leader and NotServing methods package fanout looks for.
//
// The package never decides what to do about a failure: retrying, failing
// over, hedging and health belong to package fanout. It never writes its
// own log or file format: the log, stable store and snapshot files are the
// raft library's, and snapshot contents are length-delimited protobuf.
package shard
