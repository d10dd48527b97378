// Package shard is both ends of the shard protocol.
//
// Server side: a Server holds one replica's vectors in a Store (one
// 64-byte-aligned arena of float32 rows), answers exact top-k searches with
// the vector kernels, and serves grpc.health.v1 so routers can probe it.
//
// Client side: Dial opens the router's connection to one replica with the
// settings DESIGN.md demands of every shard connection (keepalive while
// idle, TCP keepalive, connect timeout, capped reconnect backoff, no idle
// timeout, optional TLS), and Conn carries every RPC under a deadline.
//
// The package never decides what to do about a failure: retrying, failing
// over, hedging and health belong to package fanout.
package shard
