// Package recovery bounds the CPU a replica spends rebuilding itself or a
// peer: restoring a snapshot into its stores, applying the log while it
// catches up, encoding a restored store's int8 codes, and, on a leader,
// reading and streaming a snapshot or catch-up entries to a follower. On a
// shared host (replicas of several shards on one node, or a dev cluster on
// one machine) that work run flat out takes the cores from the replicas
// that serve queries; under a Throttle it runs at a set share of them.
//
// A Throttle is a token bucket (golang.org/x/time/rate) whose tokens are
// nanoseconds of CPU: work runs through Do, which measures the CPU time
// the calling thread spent on it and then waits until the bucket has paid
// for it. Work is charged after it ran because its cost is known only
// then (a batch of rows costs more with payloads, an entry more with
// int8 codes); the bucket's small burst keeps any one stretch of work
// at full speed short. A ProcessPacer shares a Throttle's bucket but
// charges all the process's CPU since its previous piece, for a replica
// alone in its process while it does not serve, when everything the
// process does is recovery (receiving and storing the log, garbage
// collection) and not only the thread that applies.
//
// It must never throttle queries or the ordinary replication of writes;
// Do must never be handed work that runs on other goroutines (only the
// calling thread's CPU is measured, so parallel work would be charged a
// fraction of its cost); and a ProcessPacer must never pace a process
// that serves queries meanwhile, whose CPU it would charge to recovery.
package recovery
