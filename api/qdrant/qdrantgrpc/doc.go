// Package qdrantgrpc serves Qdrant's gRPC API (DESIGN.md, "Qdrant-compatible
// REST (same port) and gRPC") on the router's --qdrant-grpc-addr, for the
// clients that speak only gRPC — Qdrant's Go, Rust, Java and .NET clients:
// Qdrant/HealthCheck, the Collections calls an application makes (create,
// get, list, delete, exists, aliases, payload indexes) and the Points calls
// (upsert, get, delete by ids or filter, query and query batch, search and
// search batch, scroll, count). The messages are Qdrant's own, generated
// from its .proto files (package qdrantpb).
//
// Requests are decoded into the same coordinator use cases as the REST
// routes (package api/qdrant) and trawl's /v1, with what both Qdrant
// transports share written once in api/qdrant/internal/qdrantx: same
// answers, same checks, same messages. The client's gRPC deadline is the
// query's deadline, capped by --max-deadline-ms (package budget's rules);
// the same API keys (as Qdrant's api-key metadata or a Bearer token) and
// the router's admission limiter apply. A fan-out's verdict travels in
// trailing metadata — x-trawl-degraded, and x-trawl-unavailable-shards when
// a shard is missing — so a partial answer is never silent even through a
// client that reads only the message; the degraded counters move in the
// coordinator's fan-out, once per answer, as for every other path.
//
// It must never silently ignore a Qdrant option that would change an answer
// (it refuses it by name with InvalidArgument), never let bad input reach a
// shard, never import package shard or its protocol (the coordinator calls
// the shards), hold fault logic or do deadline arithmetic of its own.
package qdrantgrpc
