package qdrant

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
)

// record is Qdrant's Record: payload and vector are null unless
// asked for, as Qdrant answers.
type record struct {
	ID      pointID         `json:"id"`
	Payload json.RawMessage `json:"payload"`
	// Vector is the dense vector, or the map of vectors by name for a
	// collection with sparse vectors (vectorsOut); nil when not asked.
	Vector any `json:"vector"`
	// OrderValue is the value an order_by scroll listed it by, an
	// integer or a float as the payload held it; absent otherwise.
	OrderValue any `json:"order_value,omitempty"`
}

type updateResult struct {
	// OperationID is null: a write spans shards, each with its own log,
	// so there is no one operation number to give.
	OperationID *uint64 `json:"operation_id"`
	Status      string  `json:"status"`
}

// toRecord builds a Record: payload (minus excluded keys) when asked, the
// vector when there is one.
func toRecord(id string, payload []byte, vec any, withPayload bool, exclude []string) (record, error) {
	rec := record{ID: pointID(id), Vector: vec}
	if withPayload {
		pl, err := qdrantx.StripKeys(payload, exclude)
		if err != nil {
			return record{}, err
		}
		rec.Payload = pl
	}
	return rec, nil
}

func (h *Handler) retrieve(w http.ResponseWriter, r *http.Request) {
	req, p, ok := decodeRequest(h, w, r, decodeRetrieve)
	if !ok {
		return
	}
	h.readPoints(w, r, p, req, func(recs []record) any { return recs })
}

func (h *Handler) getPoint(w http.ResponseWriter, r *http.Request) {
	raw := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(raw); err == nil {
			raw = u
		}
	}
	id, err := parsePathID(raw)
	if err != nil {
		h.http.Fail(w, r, wire.Invalid(err.Error()), nil)
		return
	}
	p, err := h.routeParams(r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	req := retrieveRequest{ids: []string{id}, payload: &coordinator.PayloadSelection{All: true}, withVector: true}
	h.readPoints(w, r, p, req, func(recs []record) any {
		if len(recs) == 0 {
			return nil
		}
		return recs[0]
	})
}

// readPoints reads points by id from their home shards. Its
// scatter_gather counts the shards asked: a read that could not ask one
// is an error (503), never an answer missing the point.
func (h *Handler) readPoints(w http.ResponseWriter, r *http.Request, p routeParams, req retrieveRequest, shape func([]record) any) {
	start := time.Now()
	permit := h.http.Admit(w, r, 1, p.budget.Deadline)
	if permit == nil {
		return
	}
	ans, err := h.cfg.Coordinator.Retrieve(r.Context(), coll(r), req.ids, p.budget)
	permit.Done(time.Since(start), false)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	recs := make([]record, 0, len(ans.Docs))
	for _, d := range ans.Docs {
		var pl []byte
		if req.payload != nil {
			if pl, err = req.payload.Project(d.Payload); err != nil {
				h.http.Fail(w, r, err, nil)
				return
			}
		}
		var vec any
		if req.withVector {
			vec = vectorsOut(schema(r), d.Vector, d.Sparse, d.Named)
		}
		rec, err := toRecord(d.ID, pl, vec, req.payload != nil, req.exclude)
		if err != nil {
			h.http.Fail(w, r, err, nil)
			return
		}
		recs = append(recs, rec)
	}
	sg := wire.NewScatterGather(coordinator.Answer{Summary: ans.Summary, Exact: true}, false)
	out := shape(recs)
	if out == nil {
		h.http.Fail(w, r, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound,
			Msg: fmt.Sprintf("Point with id %s does not exists!", req.ids[0])}, &sg)
		return
	}
	answer(w, r, out, &sg)
}

func (h *Handler) upsert(w http.ResponseWriter, r *http.Request) {
	recs, _, ok := decodeRequest(h, w, r, func(b []byte) ([]coordinator.Record, error) { return decodeUpsert(b, schema(r)) })
	if !ok {
		return
	}
	start := time.Now()
	permit := h.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	results := h.cfg.Coordinator.Upsert(r.Context(), coll(r), recs)
	permit.Done(time.Since(start), false)
	var errs []*coordinator.Error
	var failed []string
	for _, res := range results {
		if res.Err != nil {
			errs = append(errs, res.Err)
			if len(failed) == 0 || failed[len(failed)-1] != res.Err.Msg {
				failed = append(failed, res.Err.Msg)
			}
		}
	}
	if len(errs) > 0 {
		h.writeFailed(w, r, errs, fmt.Sprintf("%d of %d points were not written: %s",
			len(errs), len(results), strings.Join(dedupe(failed), " ")))
		return
	}
	// trawl acknowledges a write once it is committed and applied, so
	// even wait=false is answered completed: the weaker promise is kept
	// by the stronger one.
	answer(w, r, updateResult{Status: "completed"}, nil)
}

func (h *Handler) deletePoints(w http.ResponseWriter, r *http.Request) {
	rm, _, ok := decodeRequest(h, w, r, decodeDelete)
	if !ok {
		return
	}
	start := time.Now()
	permit := h.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	rm.Collection = coll(r)
	results, err := h.cfg.Coordinator.Remove(r.Context(), rm)
	permit.Done(time.Since(start), false)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	if werr := qdrantx.RemoveFailure(results); werr != nil {
		h.http.Error(w, r, werr)
		return
	}
	answer(w, r, updateResult{Status: "completed"}, nil)
}

// writeFailed answers a write that some ids or shards failed with
// the status their errors add up to (wire.WriteStatus) and msg.
func (h *Handler) writeFailed(w http.ResponseWriter, r *http.Request, errs []*coordinator.Error, msg string) {
	h.http.Error(w, r, &wire.Error{Status: wire.WriteStatus(errs), Msg: msg})
}

// dedupe drops repeated messages, keeping the first of each.
func dedupe(msgs []string) []string {
	seen := map[string]bool{}
	out := msgs[:0]
	for _, m := range msgs {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}
