package shard

import (
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// EncodeVector packs v as little-endian float32, the wire form of vectors.
func EncodeVector(v []float32) []byte { return vector.EncodeLE(v) }

// DecodeVector unpacks little-endian float32 bytes.
func DecodeVector(b []byte) ([]float32, error) { return vector.DecodeLE(b) }

// Placement is how a write was routed: the shard list's fingerprint (or
// placement.SlotsFingerprint for a collection with a slot map, with the
// map's epoch) and the shard the write is for. A replica refuses writes
// under another shard list than its data's (a reshard), and writes its
// slot map does not give it.
type Placement struct {
	Fingerprint string
	Shard       string
	SlotEpoch   uint64
	// Migrate marks a slot move's copy (shardpb.Placement.migrate).
	Migrate bool
}

// PB is p on the wire.
func (p Placement) PB() *shardpb.Placement {
	return &shardpb.Placement{Fingerprint: p.Fingerprint, Shard: p.Shard, SlotEpoch: p.SlotEpoch, Migrate: p.Migrate}
}
