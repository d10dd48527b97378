// Package store holds one replica's documents and what it scans them
// with: the float32 rows in fixed-size chunks (vector.Arena) or, for a
// collection placed on disk, in memory-mapped segment files
// (vector/segment), ids and
// payloads with their per-key payload index, the int8 codes (scanned in
// memory; for a collection on disk also kept in the segments' codes
// files, so a restart copies them rather than encode every row), the IVF
// index, and the Trainer that trains and commits the values every
// replica must share (int8 scale, IVF centroids, default nprobe).
//
// A Memory is written only by its replica's state machine, applying
// committed log entries in log order, so replicas that apply the same log
// hold the same bytes; it takes copy-on-write views for snapshots and
// hands scans a consistent ScanView under its read lock.
//
// The package is about vectors, never about replication or the network:
// it must never import raft, gRPC or the shard protocol. It learns what
// was committed from its caller, and commits trained values through the
// small Proposer interface its caller provides.
package store
