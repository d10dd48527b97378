// Package api is trawl's HTTP surface: the router's one HTTP handler. It
// serves trawl's native API — chi handlers that decode and validate /v1
// requests into the service layer's types (package coordinator), run them
// there, and encode the contract's JSON with the contract's HTTP statuses
// (DESIGN.md, "Query path", "Writes", "Other endpoints") — plus the
// probes, /metrics and /cluster/status, and mounts the Qdrant-compatible
// routes of package api/qdrant on the same port. What both dialects share
// is written once: the request handling (auth, admission, body limits,
// request ids, the access log, error writing through each dialect's
// envelope) in api/internal/httpx, and the JSON rules and blocks in
// api/internal/wire.
//
// Validation happens here, completely, before anything reaches a shard:
// bad input gets a JSON error with the right status and never panics,
// never reaches a shard, and never changes stored data. The package knows
// HTTP only: it must never import package shard, its protocol or gRPC,
// hold fault logic (fanout's) or do deadline arithmetic (budget's rules,
// applied by the coordinator).
package api
