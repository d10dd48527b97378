package shard

import (
	"encoding/binary"
	"math"

	"github.com/trawl-search/trawl/vector"
)

// EncodeVector packs v as little-endian float32, the wire form of vectors.
func EncodeVector(v []float32) []byte { return vector.EncodeLE(v) }

// DecodeVector unpacks little-endian float32 bytes.
func DecodeVector(b []byte) ([]float32, error) { return vector.DecodeLE(b) }

// appendVector appends v to b as little-endian float32.
func appendVector(b []byte, v []float32) []byte {
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}
