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
	"github.com/trawl-search/trawl/filter"
)

// Decoding of the Qdrant routes' bodies: Qdrant's shapes (its OpenAPI
// document), checked as completely as /v1's before anything reaches a
// shard. Members Qdrant defines that change nothing here (HNSW and
// quantization tuning, consistency) are accepted and ignored; members
// that would change an answer in a way trawl cannot honour (named or
// sparse vectors, shard keys, prefetch, order_by, ...) are refused by
// name; unknown members are refused, as /v1 refuses them.

// Limits of the Qdrant routes beyond /v1's.
const (
	// MaxQdrantUpsert is the most points one upsert may carry (the body
	// limit usually binds first: about 600 1536-D points as JSON).
	MaxQdrantUpsert = 10000
	// DefaultQdrantLimit is Qdrant's default limit for query and scroll.
	DefaultQdrantLimit = 10
)

var errNamedVectors = "named vectors are not supported: trawl stores one unnamed vector per point"

// qdrantVector decodes a vector where Qdrant takes a plain one, a named
// one ({"name", "vector"}, the name empty: Qdrant's default vector) or a
// sparse one, and checks it against the schema.
func qdrantVector(jv jsonVector, where string, sch coordinator.Schema) ([]float32, error) {
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
		errSparse := wire.Invalid(where + ": sparse vectors are not supported: trawl stores one dense vector per point")
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
		return qdrantVector(named.Vector, where+".vector", sch)
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

// qdrantPayloadSel decodes with_payload: true, false, a list of keys,
// {"include": [...]} or {"exclude": [...]}. Absent is def. An exclude is
// returned as all of the payload and the keys to drop (the router drops
// them). Keys must be top-level: trawl selects whole top-level keys.
func qdrantPayloadSel(raw json.RawMessage, def bool) (*coordinator.PayloadSelection, []string, error) {
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

// qdrantWithVector decodes with_vector: a boolean, or a list of vector
// names (refused: there is one unnamed vector; an empty list is false).
func qdrantWithVector(raw json.RawMessage) (bool, error) {
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

// refuseSet refuses a member trawl cannot honour, when it is set.
func refuseSet(raw json.RawMessage, msg string) error {
	if wire.IsSet(raw) {
		return wire.Invalid(msg)
	}
	return nil
}

const errShardKey = "shard_key is not supported: trawl places points by a hash of their id over every shard"

// qSearchParams is Qdrant's SearchParams: exact is honoured, the rest
// tunes structures trawl does not have and is accepted.
type qSearchParams struct {
	HNSWEf       *int            `json:"hnsw_ef"`
	Exact        *bool           `json:"exact"`
	Quantization json.RawMessage `json:"quantization"`
	IndexedOnly  *bool           `json:"indexed_only"`
	Acorn        json.RawMessage `json:"acorn"`
}

// qSearchJSON is Qdrant's SearchRequest.
type qSearchJSON struct {
	ShardKey       json.RawMessage `json:"shard_key"`
	Vector         jsonVector      `json:"vector"`
	Filter         json.RawMessage `json:"filter"`
	Params         *qSearchParams  `json:"params"`
	Limit          *int            `json:"limit"`
	Offset         *int            `json:"offset"`
	WithPayload    json.RawMessage `json:"with_payload"`
	WithVector     json.RawMessage `json:"with_vector"`
	ScoreThreshold *float64        `json:"score_threshold"`
}

// qQuery is one decoded Qdrant search or query: trawl's query, the hits
// to skip (offset) and payload keys to drop (exclude).
type qQuery struct {
	q       coordinator.Query
	offset  int
	exclude []string
}

// common fills what search and query share: limit, offset, filter,
// params, payload, vector and threshold selection.
func qCommon(limit, offset *int, defLimit int, f, wp, wv json.RawMessage, params *qSearchParams, threshold *float64) (qQuery, error) {
	out := qQuery{q: coordinator.Query{K: defLimit}}
	if limit != nil {
		out.q.K = *limit
	}
	if offset != nil {
		if *offset < 0 {
			return qQuery{}, wire.Invalid(fmt.Sprintf("offset is %d, want at least 0", *offset))
		}
		out.offset = *offset
	}
	if out.q.K < 1 || out.q.K+out.offset > wire.MaxK {
		return qQuery{}, wire.Invalid(fmt.Sprintf("limit %d and offset %d: want limit at least 1 and limit + offset at most %d", out.q.K, out.offset, wire.MaxK))
	}
	out.q.K += out.offset
	var err error
	if out.q.Filter, err = wire.ParseFilter(f); err != nil {
		return qQuery{}, err
	}
	if out.q.WithPayload, out.exclude, err = qdrantPayloadSel(wp, false); err != nil {
		return qQuery{}, err
	}
	if out.q.WithVector, err = qdrantWithVector(wv); err != nil {
		return qQuery{}, err
	}
	if params != nil && params.Exact != nil {
		out.q.Exact = *params.Exact
	}
	out.q.ScoreThreshold = threshold
	return out, nil
}

func (q qSearchJSON) validate(sch coordinator.Schema) (qQuery, error) {
	if err := refuseSet(q.ShardKey, errShardKey); err != nil {
		return qQuery{}, err
	}
	out, err := qCommon(q.Limit, q.Offset, wire.DefaultK, q.Filter, q.WithPayload, q.WithVector, q.Params, q.ScoreThreshold)
	if err != nil {
		return qQuery{}, err
	}
	if out.q.Vector, err = qdrantVector(q.Vector, "vector", sch); err != nil {
		return qQuery{}, err
	}
	return out, nil
}

func decodeQSearch(b []byte, sch coordinator.Schema) (qQuery, error) {
	var req qSearchJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return qQuery{}, err
	}
	return req.validate(sch)
}

func decodeQSearchBatch(b []byte, sch coordinator.Schema) ([]qQuery, error) {
	var req struct {
		Searches []json.RawMessage `json:"searches"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, err
	}
	if len(req.Searches) < 1 || len(req.Searches) > wire.MaxBatch {
		return nil, wire.Invalid(fmt.Sprintf("searches has %d entries, want 1..%d", len(req.Searches), wire.MaxBatch))
	}
	out := make([]qQuery, len(req.Searches))
	for i, raw := range req.Searches {
		q, err := decodeQSearch(raw, sch)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("searches[%d]: %v", i, err))
		}
		out[i] = q
	}
	return out, nil
}

// qQueryJSON is Qdrant's QueryRequest; only nearest-vector queries (by a
// vector or by a stored point's id) are served.
type qQueryJSON struct {
	ShardKey       json.RawMessage `json:"shard_key"`
	Prefetch       json.RawMessage `json:"prefetch"`
	Query          jsonVector      `json:"query"`
	Using          *string         `json:"using"`
	Filter         json.RawMessage `json:"filter"`
	Params         *qSearchParams  `json:"params"`
	ScoreThreshold *float64        `json:"score_threshold"`
	Limit          *int            `json:"limit"`
	Offset         *int            `json:"offset"`
	WithVector     json.RawMessage `json:"with_vector"`
	WithPayload    json.RawMessage `json:"with_payload"`
	LookupFrom     json.RawMessage `json:"lookup_from"`
}

func decodeQQuery(b []byte, sch coordinator.Schema) (qQuery, error) {
	var req qQueryJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return qQuery{}, err
	}
	for _, c := range []struct {
		raw json.RawMessage
		msg string
	}{
		{req.ShardKey, errShardKey},
		{req.Prefetch, "prefetch is not supported: trawl serves single-stage nearest-vector queries"},
		{req.LookupFrom, "lookup_from is not supported: trawl serves one collection"},
	} {
		if err := refuseSet(c.raw, c.msg); err != nil {
			return qQuery{}, err
		}
	}
	if req.Using != nil && *req.Using != "" {
		return qQuery{}, wire.Invalid(fmt.Sprintf("using: %s (got %q)", errNamedVectors, *req.Using))
	}
	out, err := qCommon(req.Limit, req.Offset, DefaultQdrantLimit, req.Filter, req.WithPayload, req.WithVector, req.Params, req.ScoreThreshold)
	if err != nil {
		return qQuery{}, err
	}
	if req.Query.isFloats {
		if out.q.Vector, err = qdrantVector(req.Query, "query", sch); err != nil {
			return qQuery{}, err
		}
		return out, nil
	}
	q := bytes.TrimSpace(req.Query.raw)
	if !wire.IsSet(q) {
		return qQuery{}, wire.Invalid("query is missing: trawl serves nearest-vector queries (a vector, a point id, or {\"nearest\": ...}); list points with points/scroll")
	}
	if q[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(q, &obj); err != nil {
			return qQuery{}, wire.Invalid("query: " + err.Error())
		}
		nearest, ok := obj["nearest"]
		switch {
		case ok && len(obj) == 1:
			q = bytes.TrimSpace(nearest)
		case ok && wire.IsSet(obj["mmr"]):
			return qQuery{}, wire.Invalid("query.mmr is not supported: trawl serves plain nearest-vector queries")
		case ok:
			q = bytes.TrimSpace(nearest)
		default:
			kinds := slices.Sorted(maps.Keys(obj))
			return qQuery{}, wire.Invalid(fmt.Sprintf("query %s is not supported: trawl serves nearest-vector queries (a vector, a point id, or {\"nearest\": ...})", strings.Join(kinds, ", ")))
		}
	}
	if len(q) > 0 && (q[0] == '"' || (q[0] >= '0' && q[0] <= '9') || q[0] == '-') {
		id, err := parseQdrantID(q)
		if err != nil {
			return qQuery{}, wire.Invalid("query: " + err.Error())
		}
		out.q.LikeID = id
		return out, nil
	}
	if out.q.Vector, err = qdrantVector(jsonVector{raw: q}, "query", sch); err != nil {
		return qQuery{}, err
	}
	return out, nil
}

// qScroll is a decoded scroll.
type qScroll struct {
	s       coordinator.Scroll
	exclude []string
}

func decodeQScroll(b []byte) (qScroll, error) {
	var req struct {
		ShardKey    json.RawMessage `json:"shard_key"`
		Offset      json.RawMessage `json:"offset"`
		Limit       *int            `json:"limit"`
		Filter      json.RawMessage `json:"filter"`
		WithPayload json.RawMessage `json:"with_payload"`
		WithVector  json.RawMessage `json:"with_vector"`
		OrderBy     json.RawMessage `json:"order_by"`
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}") // Qdrant takes a scroll without a body
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return qScroll{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return qScroll{}, err
	}
	if err := refuseSet(req.OrderBy, "order_by is not supported: trawl scrolls in id order"); err != nil {
		return qScroll{}, err
	}
	out := qScroll{s: coordinator.Scroll{Limit: DefaultQdrantLimit}}
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > coordinator.MaxScrollLimit {
			return qScroll{}, wire.Invalid(fmt.Sprintf("limit is %d, want 1..%d", *req.Limit, coordinator.MaxScrollLimit))
		}
		out.s.Limit = *req.Limit
	}
	if wire.IsSet(req.Offset) {
		id, err := parseQdrantID(req.Offset)
		if err != nil {
			return qScroll{}, wire.Invalid("offset: " + err.Error())
		}
		out.s.From, out.s.HasFrom = id, true
	}
	var err error
	if out.s.Filter, err = wire.ParseFilter(req.Filter); err != nil {
		return qScroll{}, err
	}
	if out.s.WithPayload, out.exclude, err = qdrantPayloadSel(req.WithPayload, true); err != nil {
		return qScroll{}, err
	}
	if out.s.WithVector, err = qdrantWithVector(req.WithVector); err != nil {
		return qScroll{}, err
	}
	return out, nil
}

func decodeQCount(b []byte) (*filter.Filter, error) {
	var req struct {
		ShardKey json.RawMessage `json:"shard_key"`
		Filter   json.RawMessage `json:"filter"`
		// Exact is accepted: trawl's counts are always exact.
		Exact *bool `json:"exact"`
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return nil, err
	}
	return wire.ParseFilter(req.Filter)
}

// qRetrieve is a decoded retrieve.
type qRetrieve struct {
	ids        []string
	payload    *coordinator.PayloadSelection
	exclude    []string
	withVector bool
}

func decodeQRetrieve(b []byte) (qRetrieve, error) {
	var req struct {
		ShardKey    json.RawMessage   `json:"shard_key"`
		IDs         []json.RawMessage `json:"ids"`
		WithPayload json.RawMessage   `json:"with_payload"`
		WithVector  json.RawMessage   `json:"with_vector"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return qRetrieve{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return qRetrieve{}, err
	}
	if req.IDs == nil {
		return qRetrieve{}, wire.Invalid(`missing "ids"`)
	}
	if len(req.IDs) > coordinator.MaxRetrieve {
		return qRetrieve{}, wire.Invalid(fmt.Sprintf("ids has %d entries, want at most %d", len(req.IDs), coordinator.MaxRetrieve))
	}
	var out qRetrieve
	seen := map[string]bool{}
	for i, raw := range req.IDs {
		id, err := parseQdrantID(raw)
		if err != nil {
			return qRetrieve{}, wire.Invalid(fmt.Sprintf("ids[%d]: %v", i, err))
		}
		if !seen[id] {
			seen[id] = true
			out.ids = append(out.ids, id)
		}
	}
	var err error
	if out.payload, out.exclude, err = qdrantPayloadSel(req.WithPayload, true); err != nil {
		return qRetrieve{}, err
	}
	if out.withVector, err = qdrantWithVector(req.WithVector); err != nil {
		return qRetrieve{}, err
	}
	return out, nil
}

// qdrantPoint is Qdrant's PointStruct.
type qdrantPoint struct {
	ID      json.RawMessage `json:"id"`
	Vector  jsonVector      `json:"vector"`
	Payload json.RawMessage `json:"payload"`
}

// decodeQUpsert decodes Qdrant's PointInsertOperations, a list of points
// or a batch of columns, all or nothing, into records.
func decodeQUpsert(b []byte, sch coordinator.Schema) ([]coordinator.Record, error) {
	var req struct {
		Points []json.RawMessage `json:"points"`
		Batch  *struct {
			IDs      []json.RawMessage `json:"ids"`
			Vectors  json.RawMessage   `json:"vectors"`
			Payloads []json.RawMessage `json:"payloads"`
		} `json:"batch"`
		ShardKey     json.RawMessage `json:"shard_key"`
		UpdateFilter json.RawMessage `json:"update_filter"`
		UpdateMode   *string         `json:"update_mode"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return nil, err
	}
	if err := refuseSet(req.UpdateFilter, "update_filter is not supported: trawl upserts unconditionally"); err != nil {
		return nil, err
	}
	if req.UpdateMode != nil && *req.UpdateMode != "upsert" {
		return nil, wire.Invalid(fmt.Sprintf("update_mode %q is not supported: trawl upserts", *req.UpdateMode))
	}
	var points []qdrantPoint
	switch {
	case (req.Points != nil) == (req.Batch != nil):
		return nil, wire.Invalid(`give exactly one of "points" or "batch"`)
	case req.Points != nil:
		points = make([]qdrantPoint, len(req.Points))
		for i, raw := range req.Points {
			if err := wire.DecodeStrict(raw, &points[i]); err != nil {
				return nil, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
			}
		}
	default:
		bt := req.Batch
		var vs []jsonVector
		if err := json.Unmarshal(bt.Vectors, &vs); err != nil {
			return nil, wire.Invalid("batch.vectors: " + errNamedVectors + ", or not a list of vectors")
		}
		if len(vs) != len(bt.IDs) || (bt.Payloads != nil && len(bt.Payloads) != len(bt.IDs)) {
			return nil, wire.Invalid(fmt.Sprintf("batch has %d ids, %d vectors and %d payloads, want as many of each", len(bt.IDs), len(vs), len(bt.Payloads)))
		}
		points = make([]qdrantPoint, len(bt.IDs))
		for i := range bt.IDs {
			points[i] = qdrantPoint{ID: bt.IDs[i], Vector: vs[i]}
			if bt.Payloads != nil {
				points[i].Payload = bt.Payloads[i]
			}
		}
	}
	if len(points) < 1 || len(points) > MaxQdrantUpsert {
		return nil, wire.Invalid(fmt.Sprintf("%d points, want 1..%d", len(points), MaxQdrantUpsert))
	}
	out := make([]coordinator.Record, len(points))
	seen := make(map[string]int, len(points))
	for i, p := range points {
		id, err := parseQdrantID(p.ID)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		if j, dup := seen[id]; dup {
			return nil, wire.Invalid(fmt.Sprintf("points[%d]: id %s repeats points[%d]", i, bytes.TrimSpace(p.ID), j))
		}
		seen[id] = i
		v, err := qdrantVector(p.Vector, "vector", sch)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		out[i] = coordinator.Record{ID: id, Vector: v}
		if wire.IsSet(p.Payload) {
			pl, err := filter.CheckPayload(p.Payload)
			if err != nil {
				return nil, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
			}
			out[i].Payload = pl
		}
	}
	return out, nil
}

// decodeQDelete decodes Qdrant's PointsSelector: {"points": [ids]} or
// {"filter": {...}}.
func decodeQDelete(b []byte) (coordinator.Removal, error) {
	var req struct {
		Points   []json.RawMessage `json:"points"`
		Filter   json.RawMessage   `json:"filter"`
		ShardKey json.RawMessage   `json:"shard_key"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return coordinator.Removal{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return coordinator.Removal{}, err
	}
	if (req.Points != nil) == wire.IsSet(req.Filter) {
		return coordinator.Removal{}, wire.Invalid(`give exactly one of "points" (ids) or "filter"`)
	}
	var rm coordinator.Removal
	if wire.IsSet(req.Filter) {
		f, err := wire.ParseFilter(req.Filter)
		if err != nil {
			return coordinator.Removal{}, err
		}
		if f.Empty() {
			// Qdrant deletes every point on an empty filter. One typo
			// from a wiped cluster is not worth matching.
			return coordinator.Removal{}, wire.Invalid("filter has no conditions, which would delete every point; trawl refuses that (delete by ids, or give the filter a condition)")
		}
		rm.Filter = f
		return rm, nil
	}
	if len(req.Points) > MaxQdrantUpsert {
		return coordinator.Removal{}, wire.Invalid(fmt.Sprintf("points has %d ids, want at most %d", len(req.Points), MaxQdrantUpsert))
	}
	for i, raw := range req.Points {
		id, err := parseQdrantID(raw)
		if err != nil {
			return coordinator.Removal{}, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		rm.IDs = append(rm.IDs, id)
	}
	return rm, nil
}

// createJSON is Qdrant's CreateCollection, as far as trawl reads it.
type createJSON struct {
	Vectors                json.RawMessage `json:"vectors"`
	SparseVectors          json.RawMessage `json:"sparse_vectors"`
	ShardNumber            json.RawMessage `json:"shard_number"`
	ShardingMethod         *string         `json:"sharding_method"`
	ReplicationFactor      json.RawMessage `json:"replication_factor"`
	WriteConsistencyFactor json.RawMessage `json:"write_consistency_factor"`
	OnDiskPayload          json.RawMessage `json:"on_disk_payload"`
	HNSWConfig             json.RawMessage `json:"hnsw_config"`
	WALConfig              json.RawMessage `json:"wal_config"`
	OptimizersConfig       json.RawMessage `json:"optimizers_config"`
	QuantizationConfig     json.RawMessage `json:"quantization_config"`
	StrictModeConfig       json.RawMessage `json:"strict_mode_config"`
	Metadata               json.RawMessage `json:"metadata"`
	InitFrom               json.RawMessage `json:"init_from"`
}

// checkCreate accepts a create that describes the collection as it is:
// one unnamed dense float32 vector of the cluster's size and distance.
// Shape and tuning members (shards, replication, HNSW, WAL, optimizer,
// quantization) are accepted and ignored: the cluster's are set where the
// shards run.
func checkCreate(b []byte, sch coordinator.Schema, name string) error {
	var req createJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return err
	}
	if wire.IsSet(req.SparseVectors) && !bytes.Equal(bytes.TrimSpace(req.SparseVectors), []byte("{}")) {
		return wire.Invalid("sparse_vectors are not supported: trawl stores one dense vector per point")
	}
	if req.ShardingMethod != nil && *req.ShardingMethod != "auto" {
		return wire.Invalid(fmt.Sprintf("sharding_method %q is not supported: trawl places points by a hash of their id", *req.ShardingMethod))
	}
	if err := refuseSet(req.InitFrom, "init_from is not supported: trawl serves one collection"); err != nil {
		return err
	}
	if !wire.IsSet(req.Vectors) {
		return wire.Invalid(fmt.Sprintf(`vectors is missing: collection %s holds vectors of {"size": %d, "distance": %q}`, name, sch.Dim, distanceOf(sch.Metric)))
	}
	var params struct {
		Size              *int            `json:"size"`
		Distance          *string         `json:"distance"`
		HNSWConfig        json.RawMessage `json:"hnsw_config"`
		QuantizationCfg   json.RawMessage `json:"quantization_config"`
		OnDisk            json.RawMessage `json:"on_disk"`
		Datatype          *string         `json:"datatype"`
		MultivectorConfig json.RawMessage `json:"multivector_config"`
	}
	if err := wire.DecodeStrict(req.Vectors, &params); err != nil || params.Size == nil || params.Distance == nil {
		return wire.Invalid(`vectors: ` + errNamedVectors + `; give {"size": N, "distance": "Cosine"|"Dot"|"Euclid"}`)
	}
	if err := refuseSet(params.MultivectorConfig, "vectors.multivector_config: multivectors are not supported: trawl stores one vector per point"); err != nil {
		return err
	}
	if params.Datatype != nil && *params.Datatype != "float32" {
		return wire.Invalid(fmt.Sprintf("vectors.datatype %q is not supported: trawl stores float32 (int8 codes are the shards' --quantization)", *params.Datatype))
	}
	want := distanceOf(sch.Metric)
	if *params.Size != sch.Dim || *params.Distance != want {
		return wire.Invalid(fmt.Sprintf("collection %s exists with vectors of size %d and distance %s (the shards' --dim and --metric), not size %d and distance %s",
			name, sch.Dim, want, *params.Size, *params.Distance))
	}
	return nil
}

// stripKeys drops the excluded top-level keys from a payload (Qdrant's
// with_payload {"exclude": [...]}).
func stripKeys(p []byte, exclude []string) (json.RawMessage, error) {
	if len(exclude) == 0 || len(p) == 0 {
		return p, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil {
		return nil, fmt.Errorf("stored payload does not decode: %w", err)
	}
	for _, k := range exclude {
		delete(obj, k)
	}
	return json.Marshal(obj)
}
