// Package filter is trawl's payload filter language: the subset of
// Qdrant's filter JSON that DESIGN.md ("Payloads, filters, thresholds")
// names, with Qdrant's spelling and meaning, and the payloads it is
// evaluated on.
//
// Parse decodes and checks a filter completely, returning an *Error that
// names the place ("filter.must[1].range: needs at least one of gt, gte,
// lt, lte"); Filter.MarshalJSON writes its canonical form, which Parse
// reads back to the same Filter. That canonical JSON is also the filter's
// wire form to the shards: a shard parses it again (it is a trust boundary
// like the router, and one grammar with one decoder cannot drift between
// a JSON and a protobuf spelling), and the parse costs microseconds beside
// a scan.
//
// CheckPayload validates a document's payload (a JSON object of at most
// MaxPayloadBytes, nested at most MaxDepth deep, no array directly in an
// array) and returns it compacted; DecodePayload turns stored payload
// bytes into the tree Match evaluates a filter on.
//
// It is a leaf of trawl's import graph: it must never import another trawl
// package, do I/O, or keep mutable package-level state. Indexes that answer
// filters without evaluating every row are in subpackage index.
package filter
