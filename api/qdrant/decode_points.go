package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/filter"
)

// scrollRequest is a decoded scroll.
type scrollRequest struct {
	s       coordinator.Scroll
	exclude []string
}

func decodeScroll(b []byte) (scrollRequest, error) {
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
		return scrollRequest{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return scrollRequest{}, err
	}
	out := scrollRequest{s: coordinator.Scroll{Limit: DefaultLimit}}
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > coordinator.MaxScrollLimit {
			return scrollRequest{}, wire.Invalid(fmt.Sprintf("limit is %d, want 1..%d", *req.Limit, coordinator.MaxScrollLimit))
		}
		out.s.Limit = *req.Limit
	}
	if wire.IsSet(req.Offset) {
		id, err := parseID(req.Offset)
		if err != nil {
			return scrollRequest{}, wire.Invalid("offset: " + err.Error())
		}
		out.s.From, out.s.HasFrom = id, true
	}
	var err error
	if wire.IsSet(req.OrderBy) {
		if out.s.HasFrom {
			return scrollRequest{}, wire.Invalid("offset cannot be used with order_by: page on with order_by.start_from")
		}
		if out.s.OrderBy, err = decodeOrderBy(req.OrderBy); err != nil {
			return scrollRequest{}, err
		}
	}
	if out.s.Filter, err = wire.ParseFilter(req.Filter); err != nil {
		return scrollRequest{}, err
	}
	if out.s.WithPayload, out.exclude, err = decodePayloadSelection(req.WithPayload, true); err != nil {
		return scrollRequest{}, err
	}
	if out.s.WithVector, err = decodeWithVector(req.WithVector); err != nil {
		return scrollRequest{}, err
	}
	return out, nil
}

// decodeOrderBy reads Qdrant's OrderByInterface: a key, or {"key",
// "direction": "asc"|"desc", "start_from": a number}. A datetime
// start_from is refused: trawl orders by numbers only.
func decodeOrderBy(raw json.RawMessage) (*coordinator.OrderBy, error) {
	var key string
	if json.Unmarshal(raw, &key) == nil {
		if err := qdrantx.CheckKey("order_by", key); err != nil {
			return nil, err
		}
		return &coordinator.OrderBy{Key: key}, nil
	}
	var ob struct {
		Key       *string         `json:"key"`
		Direction *string         `json:"direction"`
		StartFrom json.RawMessage `json:"start_from"`
	}
	if bytes.TrimSpace(raw)[0] != '{' {
		return nil, wire.Invalid("order_by is " + wire.JSONKind(raw) + `, want a payload key or {"key", "direction", "start_from"}`)
	}
	if err := wire.DecodeStrict(raw, &ob); err != nil {
		return nil, wire.Invalid("order_by: " + err.Error())
	}
	if ob.Key == nil {
		return nil, wire.Invalid(`order_by: missing "key"`)
	}
	if err := qdrantx.CheckKey("order_by.key", *ob.Key); err != nil {
		return nil, err
	}
	out := &coordinator.OrderBy{Key: *ob.Key}
	if ob.Direction != nil {
		switch *ob.Direction {
		case "asc":
		case "desc":
			out.Descending = true
		default:
			return nil, wire.Invalid(fmt.Sprintf("order_by.direction is %q, want \"asc\" or \"desc\"", *ob.Direction))
		}
	}
	if wire.IsSet(ob.StartFrom) {
		var x float64
		if err := json.Unmarshal(ob.StartFrom, &x); err != nil {
			return nil, wire.Invalid("order_by.start_from is " + wire.JSONKind(ob.StartFrom) + ", want a number (" + qdrantx.ErrOrderByDatetime + ")")
		}
		out.StartFrom, out.HasStart = x, true
	}
	return out, nil
}

func decodeCount(b []byte) (*filter.Filter, error) {
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

// retrieveRequest is a decoded retrieve.
type retrieveRequest struct {
	ids        []string
	payload    *coordinator.PayloadSelection
	exclude    []string
	withVector bool
}

func decodeRetrieve(b []byte) (retrieveRequest, error) {
	var req struct {
		ShardKey    json.RawMessage   `json:"shard_key"`
		IDs         []json.RawMessage `json:"ids"`
		WithPayload json.RawMessage   `json:"with_payload"`
		WithVector  json.RawMessage   `json:"with_vector"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return retrieveRequest{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return retrieveRequest{}, err
	}
	if req.IDs == nil {
		return retrieveRequest{}, wire.Invalid(`missing "ids"`)
	}
	if len(req.IDs) > coordinator.MaxRetrieve {
		return retrieveRequest{}, wire.Invalid(fmt.Sprintf("ids has %d entries, want at most %d", len(req.IDs), coordinator.MaxRetrieve))
	}
	var out retrieveRequest
	seen := map[string]bool{}
	for i, raw := range req.IDs {
		id, err := parseID(raw)
		if err != nil {
			return retrieveRequest{}, wire.Invalid(fmt.Sprintf("ids[%d]: %v", i, err))
		}
		if !seen[id] {
			seen[id] = true
			out.ids = append(out.ids, id)
		}
	}
	var err error
	if out.payload, out.exclude, err = decodePayloadSelection(req.WithPayload, true); err != nil {
		return retrieveRequest{}, err
	}
	if out.withVector, err = decodeWithVector(req.WithVector); err != nil {
		return retrieveRequest{}, err
	}
	return out, nil
}

// point is Qdrant's PointStruct.
type point struct {
	ID      json.RawMessage `json:"id"`
	Vector  jsonVector      `json:"vector"`
	Payload json.RawMessage `json:"payload"`
}

// decodeUpsert decodes Qdrant's PointInsertOperations, a list of points
// or a batch of columns, all or nothing, into records.
func decodeUpsert(b []byte, sch coordinator.Schema) ([]coordinator.Record, error) {
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
	var points []point
	switch {
	case (req.Points != nil) == (req.Batch != nil):
		return nil, wire.Invalid(`give exactly one of "points" or "batch"`)
	case req.Points != nil:
		points = make([]point, len(req.Points))
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
		points = make([]point, len(bt.IDs))
		for i := range bt.IDs {
			points[i] = point{ID: bt.IDs[i], Vector: vs[i]}
			if bt.Payloads != nil {
				points[i].Payload = bt.Payloads[i]
			}
		}
	}
	if len(points) < 1 || len(points) > MaxUpsert {
		return nil, wire.Invalid(fmt.Sprintf("%d points, want 1..%d", len(points), MaxUpsert))
	}
	out := make([]coordinator.Record, len(points))
	seen := make(map[string]int, len(points))
	for i, p := range points {
		id, err := parseID(p.ID)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		if j, dup := seen[id]; dup {
			return nil, wire.Invalid(fmt.Sprintf("points[%d]: id %s repeats points[%d]", i, bytes.TrimSpace(p.ID), j))
		}
		seen[id] = i
		v, sp, named, err := decodePointVectorsAll(p.Vector, "vector", sch, true)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		pl, err := wire.CheckPayload(p.Payload)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		out[i] = coordinator.Record{ID: id, Vector: v, Payload: pl, Sparse: sp, Named: named}
	}
	return out, nil
}

// decodeDelete decodes Qdrant's PointsSelector: {"points": [ids]} or
// {"filter": {...}}.
func decodeDelete(b []byte) (coordinator.Removal, error) {
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
	if len(req.Points) > MaxUpsert {
		return coordinator.Removal{}, wire.Invalid(fmt.Sprintf("points has %d ids, want at most %d", len(req.Points), MaxUpsert))
	}
	for i, raw := range req.Points {
		id, err := parseID(raw)
		if err != nil {
			return coordinator.Removal{}, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		rm.IDs = append(rm.IDs, id)
	}
	return rm, nil
}
