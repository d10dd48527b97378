// Package loader is the engine of `router load`: it reads vectors from a
// file (.npy float32 [N,dim], .fvecs, or JSON Lines with payloads) and
// upserts them through a router's POST /v1/vectors, in batches, several at
// a time, retrying what the router asks to have retried, and keeping track
// of the longest prefix of the file that the router has acknowledged so an
// interrupted load can be resumed with --resume-from.
//
// It is a client of the HTTP API and nothing more. It must never talk to
// shards or import server code (package api, the service layer, the shard
// protocol: it repeats api's three request limits, and a test holds them
// equal), and never write to stdout (the caller owns the terminal;
// progress and the summary go to the writer it is given). It must never
// report a record as loaded that the router did not acknowledge with
// "status": "ok", never skip a record silently (every record is
// acknowledged, counted as failed, or lies past the printed resume
// offset), and never hold package-level mutable state: clock, output and
// HTTP client are injected, so tests are deterministic.
package loader
