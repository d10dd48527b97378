package qdrant

import (
	"bytes"
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

// Sparse vectors on the Qdrant routes: a collection's sparse_vectors, a
// point's vectors as a map ({"": dense, "name": {"indices", "values"}}),
// queries using a sparse vector, and with_vector answers in Qdrant's
// shape.

// sparseParamsJSON is Qdrant's SparseVectorParams.
type sparseParamsJSON struct {
	Index    *sparseIndexJSON `json:"index"`
	Modifier *string          `json:"modifier"`
}

// sparseIndexJSON is Qdrant's SparseIndexParams: where the index lives
// and when a search scans instead of using it change no answer here
// (every sparse search is exact); a datatype other than float32 would
// round stored values, which trawl does not.
type sparseIndexJSON struct {
	FullScanThreshold *int    `json:"full_scan_threshold"`
	OnDisk            *bool   `json:"on_disk"`
	Datatype          *string `json:"datatype"`
}

// decodeSparseParams reads a create's sparse_vectors.
func decodeSparseParams(raw json.RawMessage) (map[string]catalog.Sparse, error) {
	if !wire.IsSet(raw) {
		return nil, nil
	}
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, wire.Invalid(`sparse_vectors is ` + wire.JSONKind(raw) + `, want {"name": {"modifier": "idf"}, ...}`)
	}
	if len(byName) > catalog.MaxSparseVectors {
		return nil, wire.Invalid(fmt.Sprintf("sparse_vectors names %d vectors, at most %d", len(byName), catalog.MaxSparseVectors))
	}
	out := make(map[string]catalog.Sparse, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		where := "sparse_vectors." + name
		if err := catalog.ValidName(name); err != nil {
			return nil, wire.Invalid(fmt.Sprintf("sparse_vectors: the name %q: want 1..%d characters of [A-Za-z0-9_.-]", name, catalog.MaxNameLen))
		}
		var p sparseParamsJSON
		if b := bytes.TrimSpace(byName[name]); !bytes.Equal(b, []byte("null")) {
			if err := wire.DecodeStrict(b, &p); err != nil {
				return nil, wire.Invalid(where + ": " + strings.TrimPrefix(err.Error(), "bad JSON: "))
			}
		}
		sp := catalog.Sparse{Modifier: catalog.ModifierNone}
		if p.Modifier != nil {
			switch *p.Modifier {
			case "none":
			case "idf":
				sp.Modifier = catalog.ModifierIDF
			default:
				return nil, wire.Invalid(fmt.Sprintf(`%s.modifier is %q, want "none" or "idf"`, where, *p.Modifier))
			}
		}
		if ix := p.Index; ix != nil {
			if ix.FullScanThreshold != nil && *ix.FullScanThreshold < 0 {
				return nil, wire.Invalid(fmt.Sprintf("%s.index.full_scan_threshold is %d, want at least 0", where, *ix.FullScanThreshold))
			}
			if ix.Datatype != nil && *ix.Datatype != "float32" {
				return nil, wire.Invalid(fmt.Sprintf("%s.index.datatype %q is not supported: trawl keeps sparse values as float32, and a narrower type would change scores", where, *ix.Datatype))
			}
		}
		out[name] = sp
	}
	if len(out) == 0 {
		return nil, nil // {} is no sparse vectors
	}
	return out, nil
}

// decodePointVectors reads a point's vector: a plain dense vector, or
// Qdrant's map of named vectors, where "" is the dense vector and the
// collection's sparse vectors are {"indices", "values"}. dense says
// whether the dense vector is required (an upsert), or may be left out
// (an update of some vectors).
func decodePointVectors(jv jsonVector, where string, sch coordinator.Schema, dense bool) ([]float32, map[string]sparsevec.Vector, error) {
	v, sp, _, err := decodePointVectorsAll(jv, where, sch, dense)
	return v, sp, err
}

// decodePointVectorsAll is decodePointVectors of a point that may also
// hold named dense vectors (a collection of named vectors).
func decodePointVectorsAll(jv jsonVector, where string, sch coordinator.Schema, dense bool) ([]float32, map[string]sparsevec.Vector, map[string][]float32, error) {
	raw := bytes.TrimSpace(jv.raw)
	if len(sch.Named) > 0 && (jv.isFloats || len(raw) > 0 && raw[0] == '[') {
		return nil, nil, nil, wire.Invalid(fmt.Sprintf(`%s: the collection's vectors are named (%s): give {"name": [...], ...}`, where, sch.NamedList()))
	}
	if jv.isFloats || len(raw) == 0 || raw[0] != '{' || len(sch.Sparse) == 0 && len(sch.Named) == 0 {
		v, err := decodeVector(jv, where, sch)
		return v, nil, nil, err
	}
	if wire.IsSparseObject(raw) {
		return nil, nil, nil, wire.Invalid(fmt.Sprintf(`%s: a sparse vector must be named: {"%s": {"indices": [...], "values": [...]}}`, where, firstSparse(sch)))
	}
	var byName map[string]jsonVector
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, nil, nil, wire.Invalid(where + ": " + err.Error())
	}
	if _, ok := byName["name"]; ok && len(byName) == 2 && len(sch.Named) == 0 {
		if _, ok := byName["vector"]; ok {
			// {"name", "vector"}: one named vector, as a search names it.
			v, err := decodeVector(jv, where, sch)
			return v, nil, nil, err
		}
	}
	var (
		vec   []float32
		sp    map[string]sparsevec.Vector
		named map[string][]float32
	)
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		at := where + "." + name
		if name == "" && sch.Dim > 0 {
			at = where + `[""]`
			v, err := decodeVector(byName[name], at, sch)
			if err != nil {
				return nil, nil, nil, err
			}
			vec = v
			continue
		}
		if v, ok, err := decodeNamedDense(byName[name], name, at, sch); ok {
			if err != nil {
				return nil, nil, nil, err
			}
			if named == nil {
				named = map[string][]float32{}
			}
			named[name] = v
			continue
		}
		if _, ok := sch.Sparse[name]; !ok {
			return nil, nil, nil, wire.Invalid(fmt.Sprintf("%s: the collection has no vector named %q (its vectors: %s)", where, name, sch.VectorNames()))
		}
		v, err := wire.DecodeSparse(byName[name].raw, at)
		if err != nil {
			return nil, nil, nil, err
		}
		if sp == nil {
			sp = map[string]sparsevec.Vector{}
		}
		sp[name] = v
	}
	if vec == nil && dense && sch.Dim > 0 {
		return nil, nil, nil, wire.Invalid(fmt.Sprintf(`%s: the dense vector is missing: a trawl point holds one dense vector, named "" in a map of vectors`, where))
	}
	return vec, sp, named, nil
}

// firstSparse is a sparse vector name of the schema, for examples.
func firstSparse(sch coordinator.Schema) string {
	if len(sch.Sparse) == 0 {
		return "name"
	}
	return slices.Sorted(maps.Keys(sch.Sparse))[0]
}

// sparseList names the schema's sparse vectors.
func sparseList(sch coordinator.Schema) string {
	if len(sch.Sparse) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(sch.Sparse)), ", ")
}

// decodeSparseQuery reads a query by the sparse vector using: raw is
// {"indices", "values"} or {"nearest": {"indices", "values"}}.
func decodeSparseQuery(raw json.RawMessage, using, where string, sch coordinator.Schema) (*coordinator.SparseQuery, error) {
	raw = bytes.TrimSpace(raw)
	if !wire.IsSparseObject(raw) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil && len(obj) == 1 && wire.IsSet(obj["nearest"]) {
			raw, where = obj["nearest"], where+".nearest"
		}
	}
	if !wire.IsSparseObject(raw) {
		return nil, wire.Invalid(fmt.Sprintf(`%s: using names the sparse vector %q, so the query is a sparse vector {"indices": [...], "values": [...]} (got %s)`, where, using, wire.JSONKind(raw)))
	}
	v, err := wire.DecodeSparse(raw, where)
	if err != nil {
		return nil, err
	}
	return &coordinator.SparseQuery{Name: using, Vector: v}, nil
}

// isSparseName reports whether name is one of the schema's sparse
// vectors.
func isSparseName(sch coordinator.Schema, name string) bool {
	_, ok := sch.Sparse[name]
	return ok
}

// namedSparseSearch reads a legacy search's vector when it is Qdrant's
// NamedSparseVector, {"name", "vector": {"indices", "values"}}; ok false
// when it is not one.
func namedSparseSearch(jv jsonVector, sch coordinator.Schema) (*coordinator.SparseQuery, bool, error) {
	raw := bytes.TrimSpace(jv.raw)
	if jv.isFloats || len(raw) == 0 || raw[0] != '{' {
		return nil, false, nil
	}
	var nv struct {
		Name   *string         `json:"name"`
		Vector json.RawMessage `json:"vector"`
	}
	if json.Unmarshal(raw, &nv) != nil || nv.Name == nil || !wire.IsSparseObject(nv.Vector) {
		return nil, false, nil
	}
	if err := wire.DecodeStrict(raw, &nv); err != nil {
		return nil, true, wire.Invalid("vector: " + err.Error())
	}
	if !isSparseName(sch, *nv.Name) {
		return nil, true, wire.Invalid(fmt.Sprintf("vector.name: the collection has no sparse vector %q (its sparse vectors: %s)", *nv.Name, sparseList(sch)))
	}
	v, err := wire.DecodeSparse(nv.Vector, "vector.vector")
	if err != nil {
		return nil, true, err
	}
	return &coordinator.SparseQuery{Name: *nv.Name, Vector: v}, true, nil
}

// sparseJSON is a sparse vector in Qdrant's answers.
type sparseJSON struct {
	Indices []uint32  `json:"indices"`
	Values  []float32 `json:"values"`
}

// vectorsOut is a point's vectors as Qdrant answers them: the plain
// dense vector when that is all the point holds (as Qdrant answers a
// point holding only its default vector), else the map of vectors by
// name, the dense one under "".
// A collection of named vectors answers the map of those the point holds
// (no "" entry: it has no unnamed vector).
func vectorsOut(sch coordinator.Schema, dense []float32, sp map[string]sparsevec.Vector, named map[string][]float32) any {
	if len(sp) == 0 && sch.Dim > 0 {
		return dense
	}
	out := map[string]any{}
	if sch.Dim > 0 {
		out[""] = dense
	}
	namedOut(out, named)
	for name, v := range sp {
		out[name] = sparseJSON{Indices: nonNil(v.Indices), Values: nonNil(v.Values)}
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// hitVectors is a hit's vectors as a scored point carries them: nil
// (left out) when the query did not ask.
func hitVectors(sch coordinator.Schema, hit coordinator.Hit) any {
	if hit.Vector == nil {
		return nil
	}
	return vectorsOut(sch, hit.Vector, hit.Sparse, hit.Named)
}

// sparseParamsOut is a sparse vector's SparseVectorParams in collection
// info: the modifier when it is idf.
type sparseParamsOut struct {
	Modifier string `json:"modifier,omitempty"`
}
