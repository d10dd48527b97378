package qdrant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/filter"
)

// Decoding of Qdrant's point edits: payload and vector updates and the
// ordered points/batch. Each decodes into coordinator.Edits, all or
// nothing, before anything reaches a shard.

// decodeSelection decodes the points (ids) or filter an edit acts on:
// exactly one of them. An empty filter, which would edit every point, is
// refused, as a delete's is.
func decodeSelection(points []json.RawMessage, rawFilter json.RawMessage, e *coordinator.Edit) error {
	if (points != nil) == wire.IsSet(rawFilter) {
		return wire.Invalid(`give exactly one of "points" (ids) or "filter"`)
	}
	if wire.IsSet(rawFilter) {
		f, err := wire.ParseFilter(rawFilter)
		if err != nil {
			return err
		}
		if f.Empty() {
			return wire.Invalid(qdrantx.ErrEmptyEdit)
		}
		e.Filter = f
		return nil
	}
	if len(points) == 0 || len(points) > MaxUpsert {
		return wire.Invalid(fmt.Sprintf("points has %d ids, want 1..%d", len(points), MaxUpsert))
	}
	seen := map[string]bool{}
	for i, raw := range points {
		id, err := parseID(raw)
		if err != nil {
			return wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		if !seen[id] {
			seen[id] = true
			e.IDs = append(e.IDs, id)
		}
	}
	return nil
}

// decodePayloadObject decodes the payload a set or overwrite writes.
func decodePayloadObject(raw json.RawMessage) ([]byte, error) {
	if !wire.IsSet(raw) {
		return nil, wire.Invalid(`missing "payload"`)
	}
	pl, err := wire.CheckPayload(raw)
	if err != nil {
		return nil, wire.Invalid(err.Error())
	}
	return pl, nil
}

// setPayloadBody is Qdrant's SetPayload, for set and overwrite.
type setPayloadBody struct {
	Payload  json.RawMessage   `json:"payload"`
	Points   []json.RawMessage `json:"points"`
	Filter   json.RawMessage   `json:"filter"`
	Key      *string           `json:"key"`
	ShardKey json.RawMessage   `json:"shard_key"`
}

// decodeSetPayload decodes a set_payload (overwrite false) or an
// overwrite_payload.
func decodeSetPayload(b []byte, overwrite bool) (coordinator.Edit, error) {
	var req setPayloadBody
	if err := wire.DecodeStrict(b, &req); err != nil {
		return coordinator.Edit{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return coordinator.Edit{}, err
	}
	e := coordinator.Edit{Kind: coordinator.EditSetPayload}
	if overwrite {
		e.Kind = coordinator.EditOverwritePayload
		if req.Key != nil {
			return coordinator.Edit{}, wire.Invalid(qdrantx.ErrOverwriteKey)
		}
	}
	var err error
	if e.Payload, err = decodePayloadObject(req.Payload); err != nil {
		return coordinator.Edit{}, err
	}
	if req.Key != nil {
		if _, err := filter.PayloadPath(*req.Key); err != nil {
			return coordinator.Edit{}, wire.Invalid(err.Error())
		}
		e.Key = *req.Key
	}
	if err := decodeSelection(req.Points, req.Filter, &e); err != nil {
		return coordinator.Edit{}, err
	}
	return e, nil
}

// decodeDeletePayload decodes Qdrant's DeletePayload: top-level keys.
func decodeDeletePayload(b []byte) (coordinator.Edit, error) {
	var req struct {
		Keys     []string          `json:"keys"`
		Points   []json.RawMessage `json:"points"`
		Filter   json.RawMessage   `json:"filter"`
		ShardKey json.RawMessage   `json:"shard_key"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return coordinator.Edit{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return coordinator.Edit{}, err
	}
	if len(req.Keys) == 0 {
		return coordinator.Edit{}, wire.Invalid(`missing "keys": give the payload keys to delete`)
	}
	for i, k := range req.Keys {
		if k == "" || strings.ContainsAny(k, ".[]") {
			return coordinator.Edit{}, wire.Invalid(fmt.Sprintf("keys[%d] (%q): want a top-level payload key (trawl deletes whole top-level keys, not nested paths)", i, k))
		}
	}
	e := coordinator.Edit{Kind: coordinator.EditDeletePayload, Keys: req.Keys}
	if err := decodeSelection(req.Points, req.Filter, &e); err != nil {
		return coordinator.Edit{}, err
	}
	return e, nil
}

// decodeClearPayload decodes a PointsSelector whose points' payloads are
// cleared.
func decodeClearPayload(b []byte) (coordinator.Edit, error) {
	var req struct {
		Points   []json.RawMessage `json:"points"`
		Filter   json.RawMessage   `json:"filter"`
		ShardKey json.RawMessage   `json:"shard_key"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return coordinator.Edit{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return coordinator.Edit{}, err
	}
	e := coordinator.Edit{Kind: coordinator.EditClearPayload}
	if err := decodeSelection(req.Points, req.Filter, &e); err != nil {
		return coordinator.Edit{}, err
	}
	return e, nil
}

// decodeUpdateVectors decodes Qdrant's UpdateVectors: existing points'
// new vectors.
func decodeUpdateVectors(b []byte, sch coordinator.Schema) (coordinator.Edit, error) {
	var req struct {
		Points       []json.RawMessage `json:"points"`
		ShardKey     json.RawMessage   `json:"shard_key"`
		UpdateFilter json.RawMessage   `json:"update_filter"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return coordinator.Edit{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return coordinator.Edit{}, err
	}
	if err := refuseSet(req.UpdateFilter, "update_filter is not supported: trawl updates the vectors of the listed points unconditionally"); err != nil {
		return coordinator.Edit{}, err
	}
	if len(req.Points) < 1 || len(req.Points) > MaxUpsert {
		return coordinator.Edit{}, wire.Invalid(fmt.Sprintf("points has %d entries, want 1..%d", len(req.Points), MaxUpsert))
	}
	e := coordinator.Edit{Kind: coordinator.EditUpdateVectors, Points: make([]coordinator.Record, len(req.Points))}
	seen := map[string]int{}
	for i, raw := range req.Points {
		var p struct {
			ID     json.RawMessage `json:"id"`
			Vector jsonVector      `json:"vector"`
		}
		if err := wire.DecodeStrict(raw, &p); err != nil {
			return coordinator.Edit{}, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		id, err := parseID(p.ID)
		if err != nil {
			return coordinator.Edit{}, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		if j, dup := seen[id]; dup {
			return coordinator.Edit{}, wire.Invalid(fmt.Sprintf("points[%d]: id %s repeats points[%d]", i, bytes.TrimSpace(p.ID), j))
		}
		seen[id] = i
		v, sp, named, err := decodePointVectorsAll(p.Vector, "vector", sch, false)
		if err != nil {
			return coordinator.Edit{}, wire.Invalid(fmt.Sprintf("points[%d]: %v", i, err))
		}
		if v == nil && sp == nil && named == nil {
			return coordinator.Edit{}, wire.Invalid(fmt.Sprintf("points[%d]: vector names no vector to update", i))
		}
		e.Points[i] = coordinator.Record{ID: id, Vector: v, Sparse: sp, Named: named}
	}
	return e, nil
}

// decodeDeleteVectors decodes Qdrant's DeleteVectors: the named and
// sparse vectors of vector are removed from the selected points (the
// unnamed vector cannot be: a point cannot be without it).
func decodeDeleteVectors(b []byte, sch coordinator.Schema) (coordinator.Edit, error) {
	var req struct {
		Points   []json.RawMessage `json:"points"`
		Filter   json.RawMessage   `json:"filter"`
		Vector   []string          `json:"vector"`
		ShardKey json.RawMessage   `json:"shard_key"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return coordinator.Edit{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return coordinator.Edit{}, err
	}
	e := coordinator.Edit{Kind: coordinator.EditDeleteVectors}
	if err := decodeSelection(req.Points, req.Filter, &e); err != nil {
		return coordinator.Edit{}, err
	}
	if err := qdrantx.CheckDeleteVectors(sch, req.Vector, "vector"); err != nil {
		return coordinator.Edit{}, err
	}
	e.Keys = req.Vector
	return e, nil
}

// decodeUpdateBatch decodes Qdrant's UpdateOperations: an ordered list of
// operations, each an object with one member naming it.
func decodeUpdateBatch(b []byte, sch coordinator.Schema) ([]coordinator.Edit, error) {
	var req struct {
		Operations []map[string]json.RawMessage `json:"operations"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, err
	}
	if len(req.Operations) < 1 || len(req.Operations) > coordinator.MaxEdits {
		return nil, wire.Invalid(fmt.Sprintf("operations has %d entries, want 1..%d", len(req.Operations), coordinator.MaxEdits))
	}
	out := make([]coordinator.Edit, 0, len(req.Operations))
	for i, op := range req.Operations {
		if len(op) != 1 {
			return nil, wire.Invalid(fmt.Sprintf("operations[%d]: want an object with exactly one operation, got %d members", i, len(op)))
		}
		for name, body := range op {
			e, err := decodeOperation(name, body, sch)
			if err != nil {
				return nil, wire.Invalid(fmt.Sprintf("operations[%d].%s: %s", i, name, message(err)))
			}
			out = append(out, e...)
		}
	}
	return out, nil
}

// decodeOperation decodes one operation of a batch.
func decodeOperation(name string, body json.RawMessage, sch coordinator.Schema) ([]coordinator.Edit, error) {
	one := func(e coordinator.Edit, err error) ([]coordinator.Edit, error) {
		if err != nil {
			return nil, err
		}
		return []coordinator.Edit{e}, nil
	}
	switch name {
	case "upsert":
		recs, err := decodeUpsert(body, sch)
		if err != nil {
			return nil, err
		}
		return []coordinator.Edit{{Kind: coordinator.EditUpsert, Points: recs}}, nil
	case "delete":
		rm, err := decodeDelete(body)
		if err != nil {
			return nil, err
		}
		return []coordinator.Edit{{Kind: coordinator.EditDelete, IDs: rm.IDs, Filter: rm.Filter}}, nil
	case "set_payload":
		return one(decodeSetPayload(body, false))
	case "overwrite_payload":
		return one(decodeSetPayload(body, true))
	case "delete_payload":
		return one(decodeDeletePayload(body))
	case "clear_payload":
		return one(decodeClearPayload(body))
	case "update_vectors":
		return one(decodeUpdateVectors(body, sch))
	case "delete_vectors":
		return one(decodeDeleteVectors(body, sch))
	}
	return nil, wire.Invalid(fmt.Sprintf("unknown operation %q (want one of upsert, delete, set_payload, overwrite_payload, delete_payload, clear_payload, update_vectors, delete_vectors)", name))
}

// message is an error's text without the status a *wire.Error carries.
func message(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Msg
	}
	return err.Error()
}
