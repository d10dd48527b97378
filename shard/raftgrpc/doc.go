// Package raftgrpc is a raft.Transport (hashicorp/raft) over the shard's
// own gRPC port: raft's structs travel as msgpack inside the Raft service
// of shardpb, heartbeats on a connection of their own, snapshots as a
// client stream, and a leader's AppendEntries to a follower pipelined on a
// bidirectional stream (answered in order; raft falls back to one at a
// time after an error). A request larger than a gRPC message may be is
// sent as consecutive smaller ones. Sharing the port means the shard's TLS
// and mTLS cover replication.
//
// It moves raft's messages and nothing else: it never decides who may
// vote or what a commit index proves beyond what its owner's hooks say,
// and it knows nothing about vectors.
package raftgrpc
