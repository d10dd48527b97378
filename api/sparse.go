package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// decodeSparseSettings reads a create's sparse_vectors: {"name":
// {"modifier": "none"|"idf"}} (an empty object or null: none).
func decodeSparseSettings(raw json.RawMessage) (map[string]catalog.Sparse, error) {
	if !wire.IsSet(raw) {
		return nil, nil
	}
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, wire.Invalid(`sparse_vectors is ` + wire.JSONKind(raw) + `, want {"name": {"modifier": "none"|"idf"}, ...}`)
	}
	out := make(map[string]catalog.Sparse, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		var p struct {
			Modifier json.RawMessage `json:"modifier"`
		}
		if wire.IsSet(byName[name]) {
			if err := wire.DecodeStrict(byName[name], &p); err != nil {
				return nil, wire.Invalid("sparse_vectors." + name + ": " + strings.TrimPrefix(err.Error(), "bad JSON: "))
			}
		}
		m, err := oneOf("sparse_vectors."+name+".modifier", p.Modifier, catalog.ModifierNone, catalog.ModifierIDF)
		if err != nil {
			return nil, err
		}
		out[name] = catalog.Sparse{Modifier: m}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// decodeSparseVectors reads a document's sparse vectors, {"name":
// {"indices", "values"}}, each a sparse vector of the collection.
func decodeSparseVectors(raw json.RawMessage, s schema, where string) (map[string]sparsevec.Vector, error) {
	if !wire.IsSet(raw) {
		return nil, nil
	}
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, wire.Invalid(where + ` is ` + wire.JSONKind(raw) + `, want {"name": {"indices": [...], "values": [...]}}`)
	}
	var out map[string]sparsevec.Vector
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if _, ok := s.Sparse[name]; !ok {
			return nil, wire.Invalid(fmt.Sprintf("%s: the collection has no sparse vector %q", where, name))
		}
		v, err := wire.DecodeSparse(byName[name], where+"."+name)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]sparsevec.Vector{}
		}
		out[name] = v
	}
	return out, nil
}

// decodeSparseQuery reads a query's sparse: {"name", "indices",
// "values"}.
func decodeSparseQuery(raw json.RawMessage, s schema) (*coordinator.SparseQuery, error) {
	var q struct {
		Name    *string         `json:"name"`
		Indices json.RawMessage `json:"indices"`
		Values  json.RawMessage `json:"values"`
	}
	if err := wire.DecodeStrict(raw, &q); err != nil {
		return nil, wire.Invalid(`sparse: ` + strings.TrimPrefix(err.Error(), "bad JSON: ") + `; want {"name", "indices", "values"}`)
	}
	if q.Name == nil {
		return nil, wire.Invalid(`sparse: missing "name", the sparse vector to query`)
	}
	if _, ok := s.Sparse[*q.Name]; !ok {
		return nil, wire.Invalid(fmt.Sprintf("sparse.name: the collection has no sparse vector %q", *q.Name))
	}
	body, err := json.Marshal(map[string]json.RawMessage{"indices": orNull(q.Indices), "values": orNull(q.Values)})
	if err != nil {
		return nil, err
	}
	v, err := wire.DecodeSparse(body, "sparse")
	if err != nil {
		return nil, err
	}
	return &coordinator.SparseQuery{Name: *q.Name, Vector: v}, nil
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
