// Package api is trawl's HTTP surface: chi handlers that decode and
// validate requests, run them through package fanout, and encode the
// contract's JSON (DESIGN.md, "Query path", "Writes", "Other endpoints").
//
// Validation happens here, completely, before anything reaches a shard:
// bad input gets a JSON error with the right status and never panics,
// never reaches a shard, and never changes stored data. The package holds
// no fault logic (that is fanout's) and no deadline arithmetic (budget's).
package api
