package vector

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// EncodeLE packs v as little-endian float32: the wire form of vectors, in
// the shard protocol and in the API's vector_b64.
func EncodeLE(v []float32) []byte { return AppendLE(make([]byte, 0, 4*len(v)), v) }

// AppendLE appends v to b as little-endian float32.
func AppendLE(b []byte, v []float32) []byte {
	if nativeLE {
		// The wire form is the memory form: one copy, not a loop per
		// element (the loop was a quarter of a shard's write cost).
		return append(b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))...)
	}
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// DecodeLE unpacks little-endian float32 bytes into a new slice.
func DecodeLE(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("vector is %d bytes, not a whole number of float32", len(b))
	}
	v := make([]float32, len(b)/4)
	if nativeLE {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(b)), b)
		return v, nil
	}
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}
