// Package budget turns a query's deadline parameter and the router's
// transport into the time the router may spend answering, and the time each
// shard RPC gets.
//
// The rules come from field report 002: a 50 ms default budgets a shard
// read, not a cold TLS hop, so once inter-node TLS is configured the default
// is 250 ms. An explicit ?deadline_ms= wins in both directions, clamped at
// the maximum.
//
// The package is pure functions over values: it must never read clocks,
// flags or the environment.
package budget
