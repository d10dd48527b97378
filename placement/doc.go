// Package placement decides which shard is a document's home: jump
// consistent hash (Lamping & Veach, 2014) of the FNV-1a 64-bit hash of the
// id, over the shard names sorted, so the order of --shard flags never
// matters and replicas never enter it.
//
// It also names the shard list with a fingerprint that shards remember, so
// writes under a changed list (a reshard) are refused instead of silently
// re-routed. Pure functions; it must never do I/O.
package placement
