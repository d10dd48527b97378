// Package catalog is the vocabulary of collections that every layer
// shares: what a collection name may be, the settings a collection is
// created with and how they are validated and written, and the
// `NAME=DIM:METRIC[:QUANTIZATION[:INDEX[:FLOAT32]]]` form of --ensure-collection.
//
// It holds rules only. It must never hold the catalog itself (the shards'
// logs do, and the coordinator caches it), and never import a layer that
// uses it.
package catalog
