package shard

import (
	"github.com/trawl-search/trawl/vector"
)

// EncodeVector packs v as little-endian float32, the wire form of vectors.
func EncodeVector(v []float32) []byte { return vector.EncodeLE(v) }

// DecodeVector unpacks little-endian float32 bytes.
func DecodeVector(b []byte) ([]float32, error) { return vector.DecodeLE(b) }

// Placement is the shard list a write was routed under: the list's
// fingerprint and the shard the write is for. A replica refuses writes
// under another placement than its data's (a reshard).
type Placement struct {
	Fingerprint string
	Shard       string
}
