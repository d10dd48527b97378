// Package httpx is the request handling both of the router's HTTP
// dialects — trawl's native /v1 API (package api) and the
// Qdrant-compatible routes (package api/qdrant) — share, written once:
// request ids, the access log, tracing, API keys and their collection
// scopes (package apikey's keyring), admission on the request line
// (DESIGN.md, "Overload"), bounded body reads, query parameters, and
// error answers. A Dialect holds it all; two dialects
// differ only in their Envelope, the JSON shape of their errors (and in
// whether the key may also come in a header of its own, Qdrant's api-key).
//
// It must never decode a dialect's bodies or shape its answers (the
// dialects do, with package wire), and never import package shard, its
// protocol or gRPC.
package httpx
