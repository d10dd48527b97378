package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/trawl-search/trawl/vector/sparsevec"
)

// IsSparseObject reports whether raw is a JSON object with an "indices"
// or "values" member: a sparse vector (as opposed to a map of named
// vectors, or {"name", "vector"}).
func IsSparseObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	_, i := probe["indices"]
	_, v := probe["values"]
	return i || v
}

// DecodeSparse reads a sparse vector, {"indices": [...], "values":
// [...]}: indices whole numbers in 0..2^32-1 and unique, values finite
// float32, as many of each. Errors name the member under where
// ("points[2].vector.text.indices[4]").
func DecodeSparse(raw json.RawMessage, where string) (sparsevec.Vector, error) {
	var sv struct {
		Indices *[]json.Number `json:"indices"`
		Values  *[]json.Number `json:"values"`
	}
	if err := DecodeStrict(raw, &sv); err != nil {
		return sparsevec.Vector{}, Invalid(fmt.Sprintf(`%s: %v; want {"indices": [...], "values": [...]}`, where, trimBad(err)))
	}
	if sv.Indices == nil || sv.Values == nil {
		return sparsevec.Vector{}, Invalid(fmt.Sprintf(`%s: want both "indices" and "values"`, where))
	}
	out := sparsevec.Vector{Indices: make([]uint32, len(*sv.Indices)), Values: make([]float32, len(*sv.Values))}
	for i, n := range *sv.Indices {
		x, err := n.Int64()
		if err != nil || x < 0 || x > math.MaxUint32 {
			return sparsevec.Vector{}, Invalid(fmt.Sprintf("%s.indices[%d] is %s, want a whole number in 0..%d", where, i, n, uint32(math.MaxUint32)))
		}
		out.Indices[i] = uint32(x)
	}
	for i, n := range *sv.Values {
		x, err := n.Float64()
		if err != nil || math.IsInf(x, 0) || math.Abs(x) > math.MaxFloat32 {
			return sparsevec.Vector{}, Invalid(fmt.Sprintf("%s.values[%d] is %s, want a finite float32", where, i, n))
		}
		out.Values[i] = float32(x)
	}
	if err := out.Validate(); err != nil {
		return sparsevec.Vector{}, Invalid(fmt.Sprintf("%s: %v", where, err))
	}
	return out, nil
}

// trimBad drops DecodeStrict's "bad JSON: " prefix where a caller adds
// its own context.
func trimBad(err error) string {
	const p = "bad JSON: "
	s := err.Error()
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
