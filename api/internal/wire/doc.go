// Package wire is what both of the router's HTTP dialects — trawl's native
// /v1 API (package api) and the Qdrant-compatible routes (package
// api/qdrant) — say the same way: strict JSON decoding, the checks every
// vector and id pass, the scatter_gather block and score encoding their
// answers carry, client errors with their status and code, and the HTTP
// status of a coordinator error or of a write's outcome.
//
// It must never hold one dialect's shapes (its request bodies, answer or
// error envelopes: those stay with the dialect), handle requests (package
// httpx), or import package shard, its protocol or gRPC.
package wire
