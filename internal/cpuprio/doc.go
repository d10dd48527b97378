// Package cpuprio runs background work on an OS thread of lower CPU
// priority (a higher nice value), so that on a machine short of cores the
// kernel runs what a user is waiting for first — a search — and the
// background — applying and storing a bulk load's log entries — takes
// the cores that are left. Nothing runs slower on an idle machine: nice
// only weighs who runs when both want a core.
//
// It is the technique storage engines use for compaction threads (RocksDB
// lowers its low-priority pool's threads the same way). Go schedules
// goroutines, not threads, so a Worker is one goroutine locked to one
// thread for its whole life; work handed to it runs there.
//
// It is a leaf: it must never import another trawl package or keep
// package-level state.
package cpuprio
