// Package client is the router's connection to one shard replica. Dial
// opens it with the settings DESIGN.md demands of every shard connection
// (keepalive while idle, TCP keepalive, connect timeout, capped reconnect
// backoff, no idle timeout, optional TLS), and Conn carries every RPC
// under the caller's deadline.
//
// Conn turns a replica's NOT_LEADER and NOT_SERVING answers into errors
// with the NeverSent/Leader and NotServing methods package fanout looks
// for, and marks a write that provably never left the router. It never
// retries or decides anything about a failure: that is fanout's.
package client
