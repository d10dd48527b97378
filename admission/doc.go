// Package admission decides which work to take on when there is more than
// the machine can finish in time (DESIGN.md, "Overload"): past capacity it
// refuses the excess at once, so the work it admits still finishes inside
// its deadline instead of every query missing it together (congestion
// collapse).
//
// Limiter is the router's: an adaptive concurrency limit learned from how
// much of their deadlines admitted queries use, with a floor and a hard cap.
// ScanQueue is a shard's: at most a fixed number of scans at once (about one
// per core), the rest queued earliest-deadline-first, and a scan that could
// not finish by its deadline given the work ahead of it refused before it
// starts.
//
// The package knows nothing of HTTP, gRPC or shards: callers map its
// refusals to 429 and RESOURCE_EXHAUSTED. It keeps no package-level state;
// clocks are injected.
package admission
