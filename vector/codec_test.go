package vector

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodeRef is the wire format spelled out element by element, the
// reference the fast path must equal on every architecture.
func decodeRef(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func TestCodecWireForm(t *testing.T) {
	nan := math.Float32frombits(0x7fc00001) // a NaN with payload bits
	for _, tc := range []struct {
		name string
		v    []float32
		wire []byte
	}{
		{"empty", []float32{}, []byte{}},
		{"one", []float32{1}, []byte{0x00, 0x00, 0x80, 0x3f}},
		{"signs and tiny", []float32{-2, math.SmallestNonzeroFloat32},
			[]byte{0x00, 0x00, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x00}},
		{"nan bits kept", []float32{nan}, []byte{0x01, 0x00, 0xc0, 0x7f}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.wire, EncodeLE(tc.v))
			got, err := DecodeLE(tc.wire)
			require.NoError(t, err)
			require.Len(t, got, len(tc.v))
			for i := range got {
				require.Equal(t, math.Float32bits(tc.v[i]), math.Float32bits(got[i]), "element %d", i)
			}
		})
	}
}

func TestDecodeLERefusesPartialFloats(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 6151} {
		_, err := DecodeLE(make([]byte, n))
		require.ErrorContains(t, err, "not a whole number of float32", "%d bytes", n)
	}
}

// DecodeLE must not alias its input: the shard keeps decoded vectors
// while gRPC reuses the request's buffers.
func TestDecodeLECopies(t *testing.T) {
	b := EncodeLE([]float32{1, 2, 3})
	v, err := DecodeLE(b)
	require.NoError(t, err)
	clear(b)
	require.Equal(t, []float32{1, 2, 3}, v)
}

func FuzzDecodeLE(f *testing.F) {
	f.Add([]byte{0x00, 0x00, 0x80, 0x3f})
	f.Add([]byte{0x01, 0x00, 0xc0, 0x7f, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeLE(b)
		if len(b)%4 != 0 {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		ref := decodeRef(b)
		require.Len(t, v, len(ref))
		for i := range v {
			require.Equal(t, math.Float32bits(ref[i]), math.Float32bits(v[i]))
		}
		require.Equal(t, b, EncodeLE(v))
	})
}

// BenchmarkDecodeLE: one 1536-D vector, the codec against the
// element-by-element reference in the same run.
func BenchmarkDecodeLE(b *testing.B) {
	v := make([]float32, DefaultDim)
	for i := range v {
		v[i] = float32(i) / DefaultDim
	}
	wire := EncodeLE(v)
	b.Run("codec", func(b *testing.B) {
		b.SetBytes(int64(len(wire)))
		for b.Loop() {
			if _, err := DecodeLE(wire); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("per_element", func(b *testing.B) {
		b.SetBytes(int64(len(wire)))
		for b.Loop() {
			_ = decodeRef(wire)
		}
	})
}
