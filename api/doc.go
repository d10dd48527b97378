// Package api is trawl's HTTP surface: chi handlers that decode and
// validate requests into the service layer's types (package coordinator),
// run them there, and encode the contract's JSON with the contract's HTTP
// statuses (DESIGN.md, "Query path", "Writes", "Other endpoints"), and
// the Qdrant-compatible subset of Qdrant's REST API on the same port
// (qdrant*.go; DESIGN.md, "Qdrant-compatible REST") over the same use
// cases, in Qdrant's shapes.
//
// Validation happens here, completely, before anything reaches a shard:
// bad input gets a JSON error with the right status and never panics,
// never reaches a shard, and never changes stored data. The package knows
// HTTP only: it must never import package shard, its protocol or gRPC,
// hold fault logic (fanout's) or do deadline arithmetic (budget's rules,
// applied by the coordinator).
package api
