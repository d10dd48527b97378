// Package sparsevec is a sparse vector (term indices and their weights)
// as every layer carries it, from the API's decoders to a shard's
// inverted index (shard/store/sparse), with the one validity rule they
// share and Qdrant's idf.
package sparsevec

import (
	"fmt"
	"math"
	"slices"
)

// Vector is a sparse vector: Values[i] is the weight of dimension
// Indices[i].
type Vector struct {
	Indices []uint32
	Values  []float32
}

// Len is the number of terms.
func (v Vector) Len() int { return len(v.Indices) }

// Validate reports why v is not a sparse vector a point may carry:
// lengths differ, an index repeats, or a value is not finite. An empty
// vector is valid (the point then holds none).
func (v Vector) Validate() error {
	if len(v.Indices) != len(v.Values) {
		return fmt.Errorf("indices has %d elements and values %d: want the same number", len(v.Indices), len(v.Values))
	}
	seen := make(map[uint32]struct{}, len(v.Indices))
	for i, t := range v.Indices {
		if _, dup := seen[t]; dup {
			return fmt.Errorf("indices[%d]: %d repeats an earlier index", i, t)
		}
		seen[t] = struct{}{}
		if f := float64(v.Values[i]); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("values[%d] is not a finite number", i)
		}
	}
	return nil
}

// Sorted returns v with its terms in ascending order (a copy when it was
// not sorted already).
func (v Vector) Sorted() Vector {
	if slices.IsSorted(v.Indices) {
		return v
	}
	idx := make([]int, len(v.Indices))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmpU32(v.Indices[a], v.Indices[b]) })
	out := Vector{Indices: make([]uint32, len(idx)), Values: make([]float32, len(idx))}
	for j, i := range idx {
		out.Indices[j], out.Values[j] = v.Indices[i], v.Values[i]
	}
	return out
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// IDF is Qdrant's inverse document frequency of a term held by df of
// the n points holding a vector of its name: ln((n − df + 0.5) / (df +
// 0.5) + 1), computed in float32 as Qdrant computes it (the logarithm of
// the float32 quotient, rounded to float32).
func IDF(n, df uint64) float32 {
	fn, fd := float32(n), float32(df)
	x := (fn-fd+0.5)/(fd+0.5) + 1
	return float32(math.Log(float64(x)))
}
