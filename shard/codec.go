package shard

import "github.com/trawl-search/trawl/vector"

// EncodeVector packs v as little-endian float32, the wire form of vectors.
func EncodeVector(v []float32) []byte { return vector.EncodeLE(v) }

// DecodeVector unpacks little-endian float32 bytes.
func DecodeVector(b []byte) ([]float32, error) { return vector.DecodeLE(b) }
