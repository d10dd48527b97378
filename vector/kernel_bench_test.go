package vector

import (
	"math/rand/v2"
	"testing"
)

// sink keeps benchmarked results alive.
var sink float32

func benchPair(n int) (a, b []float32) {
	r := rand.New(rand.NewPCG(11, 12))
	return unaligned(r, n, 0), unaligned(r, n, 0)
}

// BenchmarkDot1536 runs every kernel and the plain one-accumulator loop on
// the production dimension, from 64-byte aligned arenas.
func BenchmarkDot1536(b *testing.B) {
	x, y := benchPair(1536)
	b.Run("plain", func(b *testing.B) {
		b.SetBytes(2 * 4 * 1536)
		for b.Loop() {
			sink = plainDot(x, y)
		}
	})
	for _, k := range Available() {
		b.Run(k.Name, func(b *testing.B) {
			b.SetBytes(2 * 4 * 1536)
			for b.Loop() {
				sink = k.Dot(x, y)
			}
		})
	}
}

func BenchmarkL2Squared1536(b *testing.B) {
	x, y := benchPair(1536)
	for _, k := range Available() {
		b.Run(k.Name, func(b *testing.B) {
			b.SetBytes(2 * 4 * 1536)
			for b.Loop() {
				sink = k.L2Squared(x, y)
			}
		})
	}
}

// BenchmarkDotTail measures a length that is not a multiple of any vector
// width, so the masked tail runs every call.
func BenchmarkDotTail(b *testing.B) {
	x, y := benchPair(1543)
	for _, k := range Available() {
		b.Run(k.Name, func(b *testing.B) {
			for b.Loop() {
				sink = k.Dot(x, y)
			}
		})
	}
}
