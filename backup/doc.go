// Package backup is trawl's backup format: a directory (or a bucket
// prefix) holding a versioned JSON manifest that names every other file
// with its size and SHA-256, the collection's catalog entry, and per
// source shard its rows as a NumPy .npy file (float32 [rows, dim]), for
// an int8 collection its codes (int8 [rows, dim]) and steps (float32
// [dim]) as .npy files too, and its ids and payloads as JSON Lines in the
// same row order. The files need no trawl to read (docs/backup.md). A
// cluster backup (ClusterManifest, under ClusterDir) is one collection
// backup per collection, all at the same cuts, beside a manifest that
// lists them.
//
// The package knows the format and the storage it is written to (Store;
// Dir is a local directory or mounted volume), nothing about shards or
// the network: the coordinator feeds it the rows a cut exported, and
// reads them back to restore.
package backup
