package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

// The native point edits: PATCH /v1/vectors/{id} merges a payload into
// the document's, PUT /v1/vectors/{id} replaces its vector and keeps its
// payload. Both go through Coordinator.Edit, as Qdrant's payload and
// vector routes do.

// decodePatch decodes {"payload": {...}}.
func decodePatch(b []byte) ([]byte, error) {
	var body struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := wire.DecodeStrict(b, &body); err != nil {
		return nil, err
	}
	if !wire.IsSet(body.Payload) {
		return nil, wire.Invalid(`missing "payload"`)
	}
	pl, err := wire.CheckPayload(body.Payload)
	if err != nil {
		return nil, wire.Invalid(err.Error())
	}
	return pl, nil
}

// decodePutVector decodes {"vector": [...]} or {"vector_b64": "..."}.
func decodePutVector(b []byte, s schema) ([]float32, error) {
	var body struct {
		Vector    []float64 `json:"vector"`
		VectorB64 *string   `json:"vector_b64"`
	}
	if err := wire.DecodeStrict(b, &body); err != nil {
		return nil, err
	}
	var (
		v   []float32
		err error
	)
	switch {
	case (body.Vector != nil) == (body.VectorB64 != nil):
		return nil, wire.Invalid(`give exactly one of "vector" or "vector_b64"`)
	case body.VectorB64 != nil:
		v, err = fromBase64(*body.VectorB64)
	default:
		v, err = wire.FromJSONNumbers(body.Vector)
	}
	if err == nil {
		err = wire.CheckVector(s, v)
	}
	if err != nil {
		return nil, wire.Invalid(fmt.Sprint(err))
	}
	return v, nil
}

func (s *Server) patchPayload(w http.ResponseWriter, r *http.Request) {
	s.editOne(w, r, func(id string, body []byte, _ schema) (coordinator.Edit, error) {
		pl, err := decodePatch(body)
		return coordinator.Edit{Kind: coordinator.EditSetPayload, IDs: []string{id}, Payload: pl}, err
	})
}

func (s *Server) putVector(w http.ResponseWriter, r *http.Request) {
	s.editOne(w, r, func(id string, body []byte, sch schema) (coordinator.Edit, error) {
		v, err := decodePutVector(body, sch)
		return coordinator.Edit{Kind: coordinator.EditUpdateVectors, Points: []coordinator.Record{{ID: id, Vector: v}}}, err
	})
}

// editOne applies one edit of the document {id}: 200 {"id", "status":
// "ok"} once committed; an absent document is a 404, and other failures
// are answered as a delete's.
func (s *Server) editOne(w http.ResponseWriter, r *http.Request, decode func(id string, body []byte, sch schema) (coordinator.Edit, error)) {
	id, err := pathID(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	body, err := s.http.ReadBody(w, r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	coll, err := s.collection(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	e, err := decode(id, body, coll.Schema())
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	permit := s.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	results, err := s.cfg.Coordinator.Edit(r.Context(), coll, []coordinator.Edit{e})
	permit.Done(time.Since(start), false)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	for _, res := range results {
		if res.Err != nil {
			st := wire.WriteStatus([]*coordinator.Error{res.Err})
			wire.RetryAfter(w, st)
			wire.WriteJSON(w, st, toWriteResult(coordinator.WriteResult{ID: id, Outcome: res.Outcome, Err: res.Err}))
			return
		}
	}
	wire.WriteJSON(w, http.StatusOK, deleteResponse{ID: id, Status: "ok"})
}
