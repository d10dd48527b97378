package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

// searchParams is Qdrant's SearchParams: exact is honoured, the rest
// tunes structures trawl does not have and is accepted.
type searchParams struct {
	HNSWEf       *int            `json:"hnsw_ef"`
	Exact        *bool           `json:"exact"`
	Quantization json.RawMessage `json:"quantization"`
	IndexedOnly  *bool           `json:"indexed_only"`
	Acorn        json.RawMessage `json:"acorn"`
}

// searchJSON is Qdrant's SearchRequest.
type searchJSON struct {
	ShardKey       json.RawMessage `json:"shard_key"`
	Vector         jsonVector      `json:"vector"`
	Filter         json.RawMessage `json:"filter"`
	Params         *searchParams   `json:"params"`
	Limit          *int            `json:"limit"`
	Offset         *int            `json:"offset"`
	WithPayload    json.RawMessage `json:"with_payload"`
	WithVector     json.RawMessage `json:"with_vector"`
	ScoreThreshold *float64        `json:"score_threshold"`
}

// query is one decoded Qdrant search or query: trawl's query, the hits
// to skip (offset) and payload keys to drop (exclude).
type query struct {
	q       coordinator.Query
	offset  int
	exclude []string
	// tree, when set, is the query with its prefetches (its root's Query
	// is q): points/query with prefetch or fusion.
	tree *coordinator.Stage
}

// common fills what search and query share: limit, offset, filter,
// params, payload, vector and threshold selection.
func decodeCommon(limit, offset *int, defLimit int, f, wp, wv json.RawMessage, params *searchParams, threshold *float64) (query, error) {
	out := query{q: coordinator.Query{K: defLimit}}
	if limit != nil {
		out.q.K = *limit
	}
	if offset != nil {
		if *offset < 0 {
			return query{}, wire.Invalid(fmt.Sprintf("offset is %d, want at least 0", *offset))
		}
		out.offset = *offset
	}
	if out.q.K < 1 || out.q.K+out.offset > wire.MaxK {
		return query{}, wire.Invalid(fmt.Sprintf("limit %d and offset %d: want limit at least 1 and limit + offset at most %d", out.q.K, out.offset, wire.MaxK))
	}
	out.q.K += out.offset
	var err error
	if out.q.Filter, err = wire.ParseFilter(f); err != nil {
		return query{}, err
	}
	if out.q.WithPayload, out.exclude, err = decodePayloadSelection(wp, false); err != nil {
		return query{}, err
	}
	if out.q.WithVector, err = decodeWithVector(wv); err != nil {
		return query{}, err
	}
	if params != nil && params.Exact != nil {
		out.q.Exact = *params.Exact
	}
	out.q.ScoreThreshold = threshold
	return out, nil
}

func (q searchJSON) validate(sch coordinator.Schema) (query, error) {
	if err := refuseSet(q.ShardKey, errShardKey); err != nil {
		return query{}, err
	}
	out, err := decodeCommon(q.Limit, q.Offset, wire.DefaultK, q.Filter, q.WithPayload, q.WithVector, q.Params, q.ScoreThreshold)
	if err != nil {
		return query{}, err
	}
	if sq, ok, err := namedSparseSearch(q.Vector, sch); ok {
		out.q.Sparse = sq
		return out, err
	}
	if using, v, ok, err := namedDenseSearch(q.Vector, sch); ok {
		out.q.Using, out.q.Vector = using, v
		return out, err
	}
	if out.q.Vector, err = decodeVector(q.Vector, "vector", sch); err != nil {
		return query{}, err
	}
	return out, nil
}

func decodeSearch(b []byte, sch coordinator.Schema) (query, error) {
	var req searchJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return query{}, err
	}
	return req.validate(sch)
}

func decodeSearchBatch(b []byte, sch coordinator.Schema) ([]query, error) {
	return decodeBatch(b, sch, decodeSearch)
}

// decodeQueryBatch reads Qdrant's QueryRequestBatch: {"searches":
// [QueryRequest, ...]}, each decoded as points/query decodes one.
func decodeQueryBatch(b []byte, sch coordinator.Schema) ([]query, error) {
	return decodeBatch(b, sch, decodeQuery)
}

// decodeBatch reads {"searches": [...]} (1..wire.MaxBatch), each entry by
// decode; an error names the entry.
func decodeBatch(b []byte, sch coordinator.Schema, decode func([]byte, coordinator.Schema) (query, error)) ([]query, error) {
	var req struct {
		Searches []json.RawMessage `json:"searches"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, err
	}
	if len(req.Searches) < 1 || len(req.Searches) > wire.MaxBatch {
		return nil, wire.Invalid(fmt.Sprintf("searches has %d entries, want 1..%d", len(req.Searches), wire.MaxBatch))
	}
	out := make([]query, len(req.Searches))
	for i, raw := range req.Searches {
		q, err := decode(raw, sch)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("searches[%d]: %v", i, err))
		}
		out[i] = q
	}
	return out, nil
}

// queryJSON is Qdrant's QueryRequest; only nearest-vector queries (by a
// vector or by a stored point's id) are served.
type queryJSON struct {
	ShardKey       json.RawMessage `json:"shard_key"`
	Prefetch       json.RawMessage `json:"prefetch"`
	Query          jsonVector      `json:"query"`
	Using          *string         `json:"using"`
	Filter         json.RawMessage `json:"filter"`
	Params         *searchParams   `json:"params"`
	ScoreThreshold *float64        `json:"score_threshold"`
	Limit          *int            `json:"limit"`
	Offset         *int            `json:"offset"`
	WithVector     json.RawMessage `json:"with_vector"`
	WithPayload    json.RawMessage `json:"with_payload"`
	LookupFrom     json.RawMessage `json:"lookup_from"`
}

func decodeQuery(b []byte, sch coordinator.Schema) (query, error) {
	var req queryJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return query{}, err
	}
	if _, isFusion, _ := fusionQuery("query", req.Query.raw); wire.IsSet(req.Prefetch) || isFusion {
		return decodeQueryTree(b, sch) // decode_query.go
	}
	for _, c := range []struct {
		raw json.RawMessage
		msg string
	}{
		{req.ShardKey, errShardKey},
		{req.LookupFrom, "lookup_from is not supported: a query by id looks the point up in the collection it searches"},
	} {
		if err := refuseSet(c.raw, c.msg); err != nil {
			return query{}, err
		}
	}
	sparseUsing := req.Using != nil && isSparseName(sch, *req.Using)
	vsch, using, err := denseUsing(req.Using, sch)
	if err != nil {
		return query{}, err
	}
	if req.Using != nil && *req.Using != "" && !sparseUsing && using == "" {
		if len(sch.Sparse) == 0 {
			return query{}, wire.Invalid(fmt.Sprintf("using: %s (got %q)", errNamedVectors, *req.Using))
		}
		return query{}, wire.Invalid(fmt.Sprintf("using: %s (got %q; the collection's sparse vectors are %s)", errNamedVectors, *req.Using, sparseList(sch)))
	}
	out, err := decodeCommon(req.Limit, req.Offset, DefaultLimit, req.Filter, req.WithPayload, req.WithVector, req.Params, req.ScoreThreshold)
	if err != nil {
		return query{}, err
	}
	out.q.Using = using
	if !sparseUsing && using == "" && sch.Dim == 0 && len(sch.Named) > 0 {
		return query{}, wire.Invalid(fmt.Sprintf("using is missing: the collection's vectors are named (%s); name the one the query searches", sch.NamedList()))
	}
	if sparseUsing {
		if !req.Query.set() || req.Query.isFloats {
			return query{}, wire.Invalid(fmt.Sprintf(`query: using names the sparse vector %q, so the query is {"indices": [...], "values": [...]}`, *req.Using))
		}
		out.q.Sparse, err = decodeSparseQuery(req.Query.raw, *req.Using, "query", sch)
		return out, err
	}
	if req.Query.isFloats {
		if out.q.Vector, err = decodeVector(req.Query, "query", vsch); err != nil {
			return query{}, err
		}
		return out, nil
	}
	q := bytes.TrimSpace(req.Query.raw)
	if !wire.IsSet(q) {
		return query{}, wire.Invalid("query is missing: trawl serves nearest-vector queries (a vector, a point id, or {\"nearest\": ...}); list points with points/scroll")
	}
	if q[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(q, &obj); err != nil {
			return query{}, wire.Invalid("query: " + err.Error())
		}
		if rec, ok := obj["recommend"]; ok && len(obj) == 1 {
			var rj recommendJSON
			if err := wire.DecodeStrict(rec, &rj); err != nil {
				return query{}, wire.Invalid("query.recommend: " + err.Error())
			}
			if out.q.Recommend, err = rj.decode("query.recommend", sch); err != nil {
				return query{}, err
			}
			return out, nil
		}
		nearest, ok := obj["nearest"]
		switch {
		case ok && len(obj) == 1:
			q = bytes.TrimSpace(nearest)
		case ok && wire.IsSet(obj["mmr"]):
			return query{}, wire.Invalid("query.mmr is not supported: trawl serves plain nearest-vector queries")
		case ok:
			q = bytes.TrimSpace(nearest)
		default:
			kinds := slices.Sorted(maps.Keys(obj))
			return query{}, wire.Invalid(fmt.Sprintf("query %s is not supported: trawl serves nearest-vector queries (a vector, a point id, {\"nearest\": ...} or {\"recommend\": ...})", strings.Join(kinds, ", ")))
		}
	}
	if len(q) > 0 && (q[0] == '"' || (q[0] >= '0' && q[0] <= '9') || q[0] == '-') {
		id, err := parseID(q)
		if err != nil {
			return query{}, wire.Invalid("query: " + err.Error())
		}
		out.q.LikeID = id
		return out, nil
	}
	if out.q.Vector, err = decodeVector(jsonVector{raw: q}, "query", vsch); err != nil {
		return query{}, err
	}
	return out, nil
}
