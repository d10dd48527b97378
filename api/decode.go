package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/vector"
)

// Limits of the request contract.
const (
	MaxBodyBytes  = httpx.MaxBodyBytes
	MaxK          = wire.MaxK
	DefaultK      = wire.DefaultK
	MaxBatch      = wire.MaxBatch
	MaxWriteBatch = 256
	MaxIDBytes    = wire.MaxIDBytes
)

// schema is the collection's dimension and metric, learned from the
// shards.
type schema = coordinator.Schema

// fromBase64 decodes base64 (standard, padded or not) little-endian float32.
func fromBase64(s string) ([]float32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, wire.Invalid("vector_b64 is not valid base64: " + err.Error())
	}
	v, err := vector.DecodeLE(b)
	if err != nil {
		return nil, wire.Invalid("vector_b64: " + err.Error())
	}
	return v, nil
}

// queryJSON is one query of /v1/search or of a batch.
type queryJSON struct {
	Vector    []float64 `json:"vector"`
	VectorB64 *string   `json:"vector_b64"`
	LikeID    *string   `json:"like_id"`
	K         *int      `json:"k"`
	// Exact, Oversample and NProbe are accepted whatever the shards run
	// (DESIGN.md); shards ignore what does not apply to them (nprobe on a
	// flat shard, oversample on a float32 one).
	Exact      *bool `json:"exact"`
	Oversample *int  `json:"oversample"`
	NProbe     *int  `json:"nprobe"`
	// Filter is Qdrant's filter JSON (package filter), checked whole.
	Filter         json.RawMessage `json:"filter"`
	ScoreThreshold *float64        `json:"score_threshold"`
	// WithPayload is true, false or a list of top-level keys.
	WithPayload json.RawMessage `json:"with_payload"`
	// Sparse is a query by a named sparse vector: {"name", "indices",
	// "values"}, instead of a vector.
	Sparse json.RawMessage `json:"sparse"`
	// Using names the named vector "vector" (or "vector_b64") is a query
	// by; absent or "" for the unnamed one.
	Using *string `json:"using"`
}

// MaxOversample is the largest "oversample" a query may ask for.
const MaxOversample = 32

// MaxNProbe is the largest "nprobe" sent to shards, ivf.MaxLists: no shard
// has more lists, and a larger nprobe probes every list anyway.
const MaxNProbe = 65536

type searchJSON struct {
	queryJSON
	AllowPartial *bool `json:"allow_partial"`
}

type batchJSON struct {
	Queries      []json.RawMessage `json:"queries"`
	AllowPartial *bool             `json:"allow_partial"`
}

// query is a validated query: either a vector or a stored id to look up.
type query = coordinator.Query

// validate checks a decoded query completely.
func (q queryJSON) validate(s schema) (query, error) {
	n := 0
	if q.Vector != nil {
		n++
	}
	if q.VectorB64 != nil {
		n++
	}
	if q.LikeID != nil {
		n++
	}
	if wire.IsSet(q.Sparse) {
		n++
	}
	if n != 1 {
		return query{}, wire.Invalid(`give exactly one of "vector", "vector_b64", "like_id" or "sparse"`)
	}
	out := query{K: DefaultK}
	if q.K != nil {
		if *q.K < 1 || *q.K > MaxK {
			return query{}, wire.Invalid(fmt.Sprintf("k is %d, want 1..%d", *q.K, MaxK))
		}
		out.K = *q.K
	}
	if q.Exact != nil {
		out.Exact = *q.Exact
	}
	if q.Oversample != nil {
		if *q.Oversample < 1 || *q.Oversample > MaxOversample {
			return query{}, wire.Invalid(fmt.Sprintf("oversample is %d, want 1..%d", *q.Oversample, MaxOversample))
		}
		out.Oversample = *q.Oversample
	}
	if q.NProbe != nil {
		if *q.NProbe < 1 {
			return query{}, wire.Invalid(fmt.Sprintf("nprobe is %d, want at least 1", *q.NProbe))
		}
		// More lists than a shard has probes them all; the cap only keeps
		// the number inside the wire's uint32.
		out.NProbe = min(*q.NProbe, MaxNProbe)
	}
	f, err := wire.ParseFilter(q.Filter)
	if err != nil {
		return query{}, err
	}
	out.Filter = f
	out.ScoreThreshold = q.ScoreThreshold
	sel, err := decodeWithPayload(q.WithPayload)
	if err != nil {
		return query{}, err
	}
	out.WithPayload = sel
	if wire.IsSet(q.Sparse) {
		if q.Using != nil {
			return query{}, wire.Invalid(`using: a sparse query names its vector in sparse.name`)
		}
		out.Sparse, err = decodeSparseQuery(q.Sparse, s)
		return out, err
	}
	if s, out.Using, err = usingSchema(q.Using, s); err != nil {
		return query{}, err
	}
	switch {
	case q.LikeID != nil:
		if err := wire.CheckID(*q.LikeID); err != nil {
			return query{}, wire.Invalid("like_id: " + err.Error())
		}
		out.LikeID = *q.LikeID
		return out, nil
	case q.VectorB64 != nil:
		out.Vector, err = fromBase64(*q.VectorB64)
	default:
		out.Vector, err = wire.FromJSONNumbers(q.Vector)
	}
	if err != nil {
		return query{}, err
	}
	if err := wire.CheckVector(s, out.Vector); err != nil {
		return query{}, err
	}
	return out, nil
}

// decodeWithPayload reads with_payload: true (all of the payload), false
// or absent (none), or a list of top-level keys.
func decodeWithPayload(raw json.RawMessage) (*coordinator.PayloadSelection, error) {
	if !wire.IsSet(raw) {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		if !b {
			return nil, nil
		}
		return &coordinator.PayloadSelection{All: true}, nil
	}
	var keys []string
	if err := json.Unmarshal(raw, &keys); err != nil {
		kind := wire.JSONKind(raw)
		if kind == "an array" {
			kind = "an array that is not all strings"
		}
		return nil, wire.Invalid("with_payload is " + kind + ", want true, false or a list of top-level keys")
	}
	for i, k := range keys {
		if k == "" {
			return nil, wire.Invalid(fmt.Sprintf("with_payload[%d] is empty, want a top-level payload key", i))
		}
	}
	if keys == nil {
		keys = []string{}
	}
	return &coordinator.PayloadSelection{Keys: keys}, nil
}

// decodeSearch decodes and validates a /v1/search body.
func decodeSearch(b []byte, s schema) (query, bool, error) {
	var req searchJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return query{}, false, err
	}
	q, err := req.validate(s)
	return q, req.AllowPartial == nil || *req.AllowPartial, err
}

// decodeBatch decodes and validates a /v1/search/batch body; an error names
// the index of the first bad query.
func decodeBatch(b []byte, s schema) ([]query, bool, error) {
	var req batchJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, false, err
	}
	if len(req.Queries) < 1 || len(req.Queries) > MaxBatch {
		return nil, false, wire.Invalid(fmt.Sprintf("queries has %d entries, want 1..%d", len(req.Queries), MaxBatch))
	}
	qs := make([]query, len(req.Queries))
	for i, raw := range req.Queries {
		var qj queryJSON
		if err := wire.DecodeStrict(raw, &qj); err != nil {
			return nil, false, wire.Invalid(fmt.Sprintf("queries[%d]: %v", i, err))
		}
		q, err := qj.validate(s)
		if err != nil {
			return nil, false, wire.Invalid(fmt.Sprintf("queries[%d]: %v", i, err))
		}
		qs[i] = q
	}
	return qs, req.AllowPartial == nil || *req.AllowPartial, nil
}

type writeJSONReq struct {
	Vectors []json.RawMessage `json:"vectors"`
}

type vectorJSON struct {
	ID        *string         `json:"id"`
	Vector    []float64       `json:"vector"`
	VectorB64 *string         `json:"vector_b64"`
	Payload   json.RawMessage `json:"payload"`
	// Sparse are the document's named sparse vectors: {"name":
	// {"indices", "values"}}.
	Sparse json.RawMessage `json:"sparse"`
	// Vectors are the document's named dense vectors: {"name": [...]}.
	Vectors json.RawMessage `json:"vectors"`
}

type record = coordinator.Record

// decodeWriteJSON is decodeWrite by encoding/json, for every body: each
// entry is decoded on its own so that an error names its index.
func decodeWriteJSON(b []byte, s schema) ([]record, error) {
	var req writeJSONReq
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, err
	}
	if len(req.Vectors) < 1 || len(req.Vectors) > MaxWriteBatch {
		return nil, wire.Invalid(fmt.Sprintf("vectors has %d entries, want 1..%d", len(req.Vectors), MaxWriteBatch))
	}
	out := make([]record, len(req.Vectors))
	seen := make(map[string]int, len(req.Vectors))
	for i, raw := range req.Vectors {
		var vj vectorJSON
		if err := wire.DecodeStrict(raw, &vj); err != nil {
			return nil, wire.Invalid(fmt.Sprintf("vectors[%d]: %v", i, err))
		}
		if vj.ID == nil {
			return nil, wire.Invalid(fmt.Sprintf(`vectors[%d]: missing "id"`, i))
		}
		if err := wire.CheckID(*vj.ID); err != nil {
			return nil, wire.Invalid(fmt.Sprintf("vectors[%d]: %v", i, err))
		}
		if j, dup := seen[*vj.ID]; dup {
			return nil, wire.Invalid(fmt.Sprintf("vectors[%d]: id %q repeats vectors[%d]", i, *vj.ID, j))
		}
		seen[*vj.ID] = i
		var (
			v   []float32
			err error
		)
		switch {
		case s.Dim == 0 && (vj.Vector != nil || vj.VectorB64 != nil):
			err = wire.Invalid(`the collection has no unnamed vector: give the document's named vectors in "vectors"`)
		case s.Dim == 0:
		case (vj.Vector != nil) == (vj.VectorB64 != nil):
			err = wire.Invalid(`give exactly one of "vector" or "vector_b64"`)
		case vj.VectorB64 != nil:
			v, err = fromBase64(*vj.VectorB64)
		default:
			v, err = wire.FromJSONNumbers(vj.Vector)
		}
		if err == nil && s.Dim > 0 {
			err = wire.CheckVector(s, v)
		}
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("vectors[%d]: %v", i, err))
		}
		p, err := wire.CheckPayload(vj.Payload)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("vectors[%d]: %v", i, err))
		}
		sp, err := decodeSparseVectors(vj.Sparse, s, fmt.Sprintf("vectors[%d].sparse", i))
		if err != nil {
			return nil, err
		}
		named, err := decodeNamedVectors(vj.Vectors, s, fmt.Sprintf("vectors[%d].vectors", i))
		if err != nil {
			return nil, err
		}
		out[i] = record{ID: *vj.ID, Vector: v, Payload: p, Sparse: sp, Named: named}
	}
	return out, nil
}
