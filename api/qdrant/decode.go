package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
)

// Decoding of the Qdrant routes' bodies: Qdrant's shapes (its OpenAPI
// document), checked as completely as /v1's before anything reaches a
// shard. Members Qdrant defines that change nothing here (HNSW and
// quantization tuning, consistency) are accepted and ignored; members
// that would change an answer in a way trawl cannot honour (named or
// sparse vectors, shard keys, MMR, ...) are refused by
// name; unknown members are refused, as /v1 refuses them.

// Limits of the Qdrant routes beyond /v1's (qdrantx's, for both
// transports).
const (
	MaxUpsert    = qdrantx.MaxUpsert
	DefaultLimit = qdrantx.DefaultLimit
)

const (
	errNamedVectors = qdrantx.ErrNamedVectors
	errShardKey     = qdrantx.ErrShardKey
)

// refuseSet refuses a member trawl cannot honour, when it is set.
func refuseSet(raw json.RawMessage, msg string) error {
	if wire.IsSet(raw) {
		return wire.Invalid(msg)
	}
	return nil
}

// decodeVector decodes a vector where Qdrant takes a plain one, a named
// one ({"name", "vector"}, the name empty: Qdrant's default vector) or a
// sparse one, and checks it against the schema.
func decodeVector(jv jsonVector, where string, sch coordinator.Schema) ([]float32, error) {
	if jv.isFloats {
		return checkedVector(jv.floats, where, sch)
	}
	raw := bytes.TrimSpace(jv.raw)
	if !wire.IsSet(raw) {
		return nil, wire.Invalid(where + " is missing")
	}
	if raw[0] == '{' {
		var named struct {
			Name   *string    `json:"name"`
			Vector jsonVector `json:"vector"`
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, wire.Invalid(where + ": " + err.Error())
		}
		errSparse := wire.Invalid(where + `: a sparse vector is given by the name of one of the collection's sparse vectors: ` +
			`"using": "NAME" in points/query, {"name", "vector"} in a search, {"NAME": {"indices", "values"}} in a point`)
		if _, sparse := probe["indices"]; sparse {
			return nil, errSparse
		}
		for _, v := range probe {
			// {"name": {"indices": ..., "values": ...}}: a named sparse
			// vector (upsert), or {"name", "vector": {...}} (search).
			if bytes.Contains(v, []byte(`"indices"`)) {
				return nil, errSparse
			}
		}
		if err := wire.DecodeStrict(raw, &named); err != nil || named.Name == nil {
			return nil, wire.Invalid(fmt.Sprintf("%s: %s (got an object with %s)", where, errNamedVectors, strings.Join(slices.Sorted(maps.Keys(probe)), ", ")))
		}
		if *named.Name != "" {
			return nil, wire.Invalid(fmt.Sprintf("%s: %s (got the name %q)", where, errNamedVectors, *named.Name))
		}
		return decodeVector(named.Vector, where+".vector", sch)
	}
	if raw[0] != '[' {
		return nil, wire.Invalid(fmt.Sprintf("%s is %s, want an array of numbers", where, wire.JSONKind(raw)))
	}
	var xs []float64
	if err := json.Unmarshal(raw, &xs); err != nil {
		var multi [][]float64
		if json.Unmarshal(raw, &multi) == nil {
			return nil, wire.Invalid(where + ": multivectors are not supported: trawl stores one vector per point")
		}
		return nil, wire.Invalid(where + " is not an array of numbers")
	}
	return checkedVector(xs, where, sch)
}

// checkedVector narrows and checks a decoded vector.
func checkedVector(xs []float64, where string, sch coordinator.Schema) ([]float32, error) {
	v, err := wire.FromJSONNumbers(xs)
	if err != nil {
		return nil, wire.Invalid(where + ": " + err.Error())
	}
	if err := wire.CheckVector(sch, v); err != nil {
		if where == "vector" {
			return nil, err // "vector has 1535 dimensions, want 1536" names it already
		}
		return nil, wire.Invalid(where + ": " + err.Error())
	}
	return v, nil
}

// decodePayloadSelection decodes with_payload: true, false, a list of keys,
// {"include": [...]} or {"exclude": [...]}. Absent is def. An exclude is
// returned as all of the payload and the keys to drop (the router drops
// them). Keys must be top-level: trawl selects whole top-level keys.
func decodePayloadSelection(raw json.RawMessage, def bool) (*coordinator.PayloadSelection, []string, error) {
	if !wire.IsSet(raw) {
		if def {
			return &coordinator.PayloadSelection{All: true}, nil, nil
		}
		return nil, nil, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		if b {
			return &coordinator.PayloadSelection{All: true}, nil, nil
		}
		return nil, nil, nil
	}
	var keys []string
	var exclude bool
	if err := json.Unmarshal(raw, &keys); err != nil {
		var sel struct {
			Include []string `json:"include"`
			Exclude []string `json:"exclude"`
		}
		if err := wire.DecodeStrict(raw, &sel); err != nil || (sel.Include == nil) == (sel.Exclude == nil) {
			return nil, nil, wire.Invalid("with_payload is " + wire.JSONKind(raw) + `, want true, false, a list of keys, {"include": [...]} or {"exclude": [...]}`)
		}
		keys, exclude = sel.Include, sel.Exclude != nil
		if exclude {
			keys = sel.Exclude
		}
	}
	for i, k := range keys {
		if k == "" || hasDot(k) {
			return nil, nil, wire.Invalid(fmt.Sprintf("with_payload key %d (%q): want a top-level payload key (trawl selects whole top-level keys, not nested paths)", i, k))
		}
	}
	if exclude {
		return &coordinator.PayloadSelection{All: true}, keys, nil
	}
	if keys == nil {
		keys = []string{}
	}
	return &coordinator.PayloadSelection{Keys: keys}, nil, nil
}

// hasDot reports whether a payload key is a nested path.
func hasDot(k string) bool { return strings.Contains(k, ".") }

// decodeWithVector decodes with_vector: a boolean, or a list of vector
// names (refused: there is one unnamed vector; an empty list is false).
func decodeWithVector(raw json.RawMessage) (bool, error) {
	if !wire.IsSet(raw) {
		return false, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b, nil
	}
	var names []string
	if json.Unmarshal(raw, &names) == nil {
		if len(names) == 0 {
			return false, nil
		}
		return false, wire.Invalid("with_vector: " + errNamedVectors + "; use true or false")
	}
	return false, wire.Invalid("with_vector is " + wire.JSONKind(raw) + ", want true or false")
}
