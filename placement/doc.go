// Package placement decides which shard holds a document. A collection is
// split into a fixed number of hash slots (Slot: jump consistent hash,
// Lamping & Veach 2014, of the FNV-1a 64-bit hash of the id), and its
// SlotMap names the shard that holds each slot, at an epoch raised by
// every change of an owner. Even deals a new collection's slots over the
// shard names sorted, so the order of --shard flags never matters and
// replicas never enter it.
//
// Table is the placement of collections created before slots: jump hash
// over the sorted shard names, named by a fingerprint that shards remember
// so writes under a changed list are refused instead of silently
// re-routed. Legacy is the slot map that reproduces it exactly.
//
// Pure functions; it must never do I/O.
package placement
