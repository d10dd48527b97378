// Package qdrant serves the Qdrant-compatible REST routes on the router's
// HTTP port (DESIGN.md, "Qdrant-compatible REST"): the subset of Qdrant's
// API — GET / and /collections/... — that Qdrant's clients and the
// LangChain, LlamaIndex and Haystack stores use, so applications written
// for Qdrant run against trawl unchanged. Requests are decoded from
// Qdrant's shapes into the same coordinator use cases as trawl's native
// /v1 API (package api), and answered in Qdrant's envelope with trawl's
// scatter_gather beside the result and X-Trawl-Degraded set, so a partial
// answer is never silent.
//
// Auth, admission, body limits and error writing are the ones /v1 uses
// (package httpx); only the envelope is Qdrant's. Package api mounts the
// routes (Handler.Mount) on its port. Qdrant's gRPC API is served beside
// it by subpackage qdrantgrpc; what both transports share is in
// internal/qdrantx.
//
// It must never silently ignore a Qdrant option that would change an
// answer (it refuses it by name, in a Qdrant-style 400), never let bad
// input reach a shard, never import package api (api imports it), and,
// like api, know HTTP only: never import package shard, its protocol or
// gRPC (nor qdrantgrpc), hold fault logic or do deadline arithmetic.
package qdrant
