package wire

import (
	"fmt"
	"math"

	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/vector"
)

// Limits both dialects check.
const (
	MaxK       = vector.MaxK
	DefaultK   = 10
	MaxBatch   = 256
	MaxIDBytes = 256
)

// CheckVector validates a decoded vector against the collection's schema.
func CheckVector(s coordinator.Schema, v []float32) error {
	if len(v) != s.Dim {
		return Invalid(fmt.Sprintf("vector has %d dimensions, want %d", len(v), s.Dim))
	}
	zero := true
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return Invalid(fmt.Sprintf("vector element %d is %v, want a finite float32", i, f))
		}
		if f != 0 {
			zero = false
		}
	}
	if zero && s.Metric == vector.Cosine {
		return Invalid("vector is all zeros, which has no direction under the cosine metric")
	}
	return nil
}

// FromJSONNumbers narrows JSON numbers to float32, refusing values beyond
// float32's range (which would silently become ±Inf).
func FromJSONNumbers(xs []float64) ([]float32, error) {
	v := make([]float32, len(xs))
	for i, x := range xs {
		if math.Abs(x) > math.MaxFloat32 {
			return nil, Invalid(fmt.Sprintf("vector element %d is %g, beyond the float32 range", i, x))
		}
		v[i] = float32(x)
	}
	return v, nil
}

// CheckID checks a trawl id's length. Its error is plain: callers say
// where the id was.
func CheckID(id string) error {
	if len(id) < 1 || len(id) > MaxIDBytes {
		return fmt.Errorf("id is %d bytes, want 1..%d", len(id), MaxIDBytes)
	}
	return nil
}
