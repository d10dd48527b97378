package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
)

// Named dense vectors on the Qdrant routes: a create's vectors as a map
// of VectorParams, a point's vectors by name, queries using a named
// vector, and with_vector answers in Qdrant's shape.

// isNamedParams reports whether a create's vectors is Qdrant's map of
// named VectorParams rather than one VectorParams: an object naming
// neither size nor distance.
func isNamedParams(raw json.RawMessage) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	_, hasSize := probe["size"]
	_, hasDistance := probe["distance"]
	return !hasSize && !hasDistance
}

// decodeNamedParams reads a create's vectors as named VectorParams. A
// vector's quantization_config overrides the collection's (topQuant), as
// in Qdrant. A named vector's rows are kept in memory, so on_disk true
// is refused rather than ignored.
func decodeNamedParams(raw, topQuant json.RawMessage) (map[string]catalog.Dense, error) {
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, wire.Invalid(`vectors is ` + wire.JSONKind(raw) + `, want {"size": N, "distance": ...} or {"name": {"size": N, "distance": ...}, ...}`)
	}
	if len(byName) == 0 {
		return nil, wire.Invalid(`vectors is {}: a trawl collection holds a dense vector; give {"size": N, "distance": ...} or {"name": {"size": N, "distance": ...}}`)
	}
	if len(byName) > catalog.MaxNamedVectors {
		return nil, wire.Invalid(fmt.Sprintf("vectors names %d vectors, at most %d", len(byName), catalog.MaxNamedVectors))
	}
	topScalar, err := decodeQuantization(topQuant, "quantization_config")
	if err != nil {
		return nil, err
	}
	out := make(map[string]catalog.Dense, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		where := "vectors." + name
		if name == "" {
			return nil, wire.Invalid(`vectors: the name "" is the unnamed vector's; give {"size": N, "distance": ...} for it, or name every vector`)
		}
		if err := catalog.ValidName(name); err != nil {
			return nil, wire.Invalid(fmt.Sprintf("vectors: the name %q: want 1..%d characters of [A-Za-z0-9_.-]", name, catalog.MaxNameLen))
		}
		p, err := decodeVectorParamsAt(byName[name], where)
		if err != nil {
			return nil, err
		}
		scalar := topScalar
		if wire.IsSet(p.QuantizationConfig) {
			if scalar, err = decodeQuantization(p.QuantizationConfig, where+".quantization_config"); err != nil {
				return nil, err
			}
		}
		if p.OnDisk != nil && *p.OnDisk {
			return nil, wire.Invalid(where + ".on_disk true is not supported: a named vector's rows are kept in memory")
		}
		d := catalog.Dense{Dim: *p.Size, Metric: qdrantx.Distances[*p.Distance], Quantization: catalog.QuantNone}
		if scalar {
			d.Quantization = catalog.QuantInt8
		}
		out[name] = d
	}
	return out, nil
}

// decodeNamedDense reads a point's named dense vector name, checked
// against its size; ok is false when the schema has no such named
// vector.
func decodeNamedDense(jv jsonVector, name, where string, sch coordinator.Schema) ([]float32, bool, error) {
	vs, ok := sch.ForVector(name)
	if !ok || name == "" {
		return nil, false, nil
	}
	raw := bytes.TrimSpace(jv.raw)
	if !jv.isFloats && len(raw) > 0 && raw[0] != '[' {
		return nil, true, wire.Invalid(fmt.Sprintf("%s is %s, want an array of %d numbers", where, wire.JSONKind(raw), vs.Dim))
	}
	v, err := decodeVector(jv, where, vs)
	return v, true, err
}

// namedOut adds named dense vectors to a point's vectors as Qdrant
// answers them (a map by name).
func namedOut(out map[string]any, named map[string][]float32) {
	for name, v := range named {
		out[name] = v
	}
}

// denseUsing is the schema a query's dense vector is checked against and
// the named vector it searches ("" for the unnamed one): using when it
// names one of the collection's named dense vectors. A collection of
// named vectors needs using on a dense query (the caller refuses one
// without); a using naming neither a
// named nor a sparse vector is left to the caller's refusal, except in a
// collection of named vectors, where it is refused here naming them.
func denseUsing(using *string, sch coordinator.Schema) (coordinator.Schema, string, error) {
	if using != nil && *using != "" {
		if vs, ok := sch.ForVector(*using); ok {
			return vs, *using, nil
		}
		if _, sparse := sch.Sparse[*using]; !sparse && len(sch.Named) > 0 {
			return sch, "", wire.Invalid(fmt.Sprintf("using: the collection has no vector named %q (its vectors: %s)", *using, sch.VectorNames()))
		}
		return sch, "", nil
	}
	return sch, "", nil
}

// namedDenseSearch reads a legacy search's vector when it is Qdrant's
// NamedVector naming one of the collection's named dense vectors,
// {"name", "vector": [...]}; ok false when it is not one.
func namedDenseSearch(jv jsonVector, sch coordinator.Schema) (string, []float32, bool, error) {
	raw := bytes.TrimSpace(jv.raw)
	if len(sch.Named) == 0 || jv.isFloats || len(raw) == 0 || raw[0] != '{' {
		if len(sch.Named) > 0 && sch.Dim == 0 {
			return "", nil, true, wire.Invalid(fmt.Sprintf(`vector: the collection's vectors are named (%s): give {"name": "...", "vector": [...]}`, sch.NamedList()))
		}
		return "", nil, false, nil
	}
	var nv struct {
		Name   *string    `json:"name"`
		Vector jsonVector `json:"vector"`
	}
	if err := wire.DecodeStrict(raw, &nv); err != nil || nv.Name == nil {
		return "", nil, false, nil
	}
	vs, ok := sch.ForVector(*nv.Name)
	if !ok || *nv.Name == "" {
		return "", nil, true, wire.Invalid(fmt.Sprintf("vector.name: the collection has no vector named %q (its vectors: %s)", *nv.Name, sch.VectorNames()))
	}
	v, err := decodeVector(nv.Vector, "vector.vector", vs)
	return *nv.Name, v, true, err
}
