// Package coordinator is the router's service layer: the use cases an
// HTTP request turns into — search and batch search (with like_id lookups),
// get, upsert, delete and cluster status — run over the fanout engine and
// the shard clients. It owns the deadline arithmetic of each use case (from
// the budget package's rules), the routing of writes to their home shard,
// read-after-write (the log index each read must see, and which replicas
// are known to have applied it, to ask first), the merge of shard answers, and the translation of shard answers (gRPC
// codes) into its own typed errors.
//
// It knows no HTTP: package api decodes and validates requests into this
// package's types and encodes its answers. It holds no fault logic either:
// failover, hedging and health belong to package fanout, which this package
// calls with closures over *shard.Conn.
package coordinator
