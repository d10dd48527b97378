// Package fanout is trawl's scatter-gather engine: it sends one read to
// every shard under the query's budget, picks which replica of each shard
// serves it (first any the caller prefers, among the healthy ones), fails over within the call on connectivity errors, hedges slow
// replicas, tracks each replica's health (suspect after 3 consecutive
// connectivity failures, a 5 s cooldown, a background prober), and sends
// writes to every replica of a shard without ever replaying one that may
// have been delivered.
//
// It is generic over the replica type and the call it is given, so every
// fan-out path (search, batch search, lookups, writes) shares one engine and
// tests drive it with fake replicas and an injected clock. All of trawl's
// fault logic lives here and nowhere else. It must never import package
// shard or know about HTTP; it reads gRPC status codes because those are the
// language every shard answer speaks.
package fanout
