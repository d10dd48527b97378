package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/vector"
)

// Named dense vectors on /v1: a create's "vectors" ({"name":
// {"dimension", "metric", "quantization"}}, in place of the unnamed
// vector's members), a document's "vectors" ({"name": [floats]}), a
// query's "using", and a get's "vectors".

// namedSettingsJSON is one named vector's settings on /v1.
type namedSettingsJSON struct {
	Dimension    json.RawMessage `json:"dimension"`
	Metric       json.RawMessage `json:"metric"`
	Quantization json.RawMessage `json:"quantization"`
}

// namedSettingsOut is one named vector's settings in an answer.
type namedSettingsOut struct {
	Dimension    int    `json:"dimension"`
	Metric       string `json:"metric"`
	Quantization string `json:"quantization"`
}

// decodeNamedSettings reads a create's vectors: each name's dimension
// (required), metric (cosine when absent) and quantization (none when
// absent).
func decodeNamedSettings(raw json.RawMessage) (map[string]catalog.Dense, error) {
	if !wire.IsSet(raw) {
		return nil, nil
	}
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, wire.Invalid(`vectors is ` + wire.JSONKind(raw) + `, want {"name": {"dimension": N, "metric": "cosine"|"dot"|"l2"}, ...}`)
	}
	if len(byName) == 0 {
		return nil, wire.Invalid(`vectors is {}: name at least one vector, or leave vectors out for the unnamed one`)
	}
	_, size := byName["size"]
	_, distance := byName["distance"]
	if size || distance {
		return nil, wire.Invalid(`vectors: {"size", "distance"} is Qdrant's shape (its routes are /collections/...); ` +
			`on /v1 give "dimension" and "metric" for the unnamed vector, or {"name": {"dimension": N, "metric": ...}} for named ones`)
	}
	out := make(map[string]catalog.Dense, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		where := "vectors." + name
		var p namedSettingsJSON
		if err := wire.DecodeStrict(byName[name], &p); err != nil {
			return nil, wire.Invalid(where + ": " + strings.TrimPrefix(err.Error(), "bad JSON: "))
		}
		want := fmt.Sprintf("want an integer %d..%d", catalog.MinDim, catalog.MaxDim)
		if !wire.IsSet(p.Dimension) {
			return nil, wire.Invalid(where + ".dimension is missing: " + want)
		}
		d, err := strconv.ParseInt(string(bytes.TrimSpace(p.Dimension)), 10, 64)
		if err != nil || d < catalog.MinDim || d > catalog.MaxDim {
			return nil, wire.Invalid(fmt.Sprintf("%s.dimension is %s, %s", where, clip(string(bytes.TrimSpace(p.Dimension))), want))
		}
		metric, err := oneOf(where+".metric", p.Metric, "cosine", "dot", "l2")
		if err != nil {
			return nil, err
		}
		m := vector.Cosine
		if metric != "" {
			m, _ = vector.ParseMetric(metric)
		}
		q, err := oneOf(where+".quantization", p.Quantization, catalog.QuantNone, catalog.QuantInt8)
		if err != nil {
			return nil, err
		}
		out[name] = catalog.Dense{Dim: int(d), Metric: m, Quantization: q}
	}
	return out, nil
}

// checkNamedCreate refuses a create naming both vectors and one of the
// unnamed vector's members: a collection has one or the other.
func checkNamedCreate(req createJSON) error {
	if !wire.IsSet(req.Vectors) {
		return nil
	}
	for _, m := range []struct {
		name string
		raw  json.RawMessage
	}{{"dimension", req.Dimension}, {"metric", req.Metric}, {"quantization", req.Quantization}, {"index", req.Index}, {"float32", req.Float32}} {
		if wire.IsSet(m.raw) {
			return wire.Invalid(fmt.Sprintf("%s: a collection of named vectors (vectors) has no unnamed vector; give each vector's settings under vectors", m.name))
		}
	}
	return nil
}

// decodeNamedVectors reads a document's named vectors, {"name":
// [floats]}, each of its vector's dimension.
func decodeNamedVectors(raw json.RawMessage, s schema, where string) (map[string][]float32, error) {
	if !wire.IsSet(raw) {
		return nil, nil
	}
	var byName map[string][]float64
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, wire.Invalid(where + ` is ` + wire.JSONKind(raw) + `, want {"name": [numbers], ...}`)
	}
	var out map[string][]float32
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		vs, ok := s.ForVector(name)
		if !ok || name == "" {
			return nil, wire.Invalid(fmt.Sprintf("%s: the collection has no named vector %q", where, name))
		}
		v, err := wire.FromJSONNumbers(byName[name])
		if err == nil {
			err = wire.CheckVector(vs, v)
		}
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("%s.%s: %v", where, name, err))
		}
		if out == nil {
			out = map[string][]float32{}
		}
		out[name] = v
	}
	return out, nil
}

// namedSettingsOf is a collection's named vectors in an answer, nil for
// none.
func namedSettingsOf(named map[string]catalog.Dense) map[string]namedSettingsOut {
	if len(named) == 0 {
		return nil
	}
	out := make(map[string]namedSettingsOut, len(named))
	for name, d := range named {
		out[name] = namedSettingsOut{Dimension: d.Dim, Metric: d.Metric.String(), Quantization: d.Quantization}
	}
	return out
}

// usingSchema is the schema a query's vector is checked against: the
// named vector using names, or the collection's unnamed one.
func usingSchema(using *string, s schema) (schema, string, error) {
	if using == nil || *using == "" {
		if s.Dim == 0 && len(s.Named) > 0 {
			return s, "", wire.Invalid(fmt.Sprintf("using is missing: the collection's vectors are named (%s); name the one to search", strings.Join(slices.Sorted(maps.Keys(s.Named)), ", ")))
		}
		return s, "", nil
	}
	vs, ok := s.ForVector(*using)
	if !ok {
		return s, "", wire.Invalid(fmt.Sprintf("using: the collection has no named vector %q", *using))
	}
	return vs, *using, nil
}
