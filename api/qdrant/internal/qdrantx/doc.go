// Package qdrantx is what both of the router's Qdrant transports — the
// REST routes (package api/qdrant) and the gRPC services (package
// api/qdrant/qdrantgrpc) — say and do the same way, written once: point
// ids, distances, payload-index types, the refusals' wording and limits,
// and the use-case sequences one Qdrant call makes of several coordinator
// calls (a collection's counts, alias changes, a collection's delete, a
// create's conflict).
//
// Its errors are *wire.Error (HTTP-classified; the gRPC transport maps
// their status to a gRPC code) or coordinator errors. It must never
// decode a transport's requests or shape its answers (JSON bodies stay in
// api/qdrant, protobuf messages in qdrantgrpc), and never import package
// shard, its protocol or gRPC.
package qdrantx
