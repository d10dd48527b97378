// Package metrics defines trawl's Prometheus collectors (prefix trawl_) on a
// registry the caller passes in, and the small methods the router and shard
// call to move them.
//
// Names, types and labels are part of the contract (DESIGN.md, "Metrics"):
// the Helm chart's alerts and the Grafana dashboard read them. Labelled
// counters are created at zero for every known shard, replica and path, so
// a rate() over them exists before the first failure. The package must
// never register on the global default registry.
package metrics
