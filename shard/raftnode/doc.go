// Package raftnode makes a replica one member of its shard's raft group
// (hashicorp/raft): the durable log and stable store (raft-boltdb) and
// snapshots in the data directory, the bootstrap of a new group, and the
// serving rule — whether the replica may answer reads now (it has heard
// from a leader lately and applied what that leader committed).
//
// Snapshots are raft's FileSnapshotStore plus files the state machine
// hard-links into them (snapfiles.go): a snapshot of a large store links
// its files instead of copying them, a restore on the same replica links
// them back, and the stream raft sends a follower carries their bytes.
//
// Committed entries go to a StateMachine its owner provides; the package
// knows nothing about vectors, documents or the shard's commands, and
// must never import the store or the server.
package raftnode
