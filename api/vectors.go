package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

type writeResult struct {
	ID      string     `json:"id"`
	Status  string     `json:"status"`
	Outcome string     `json:"outcome,omitempty"`
	Error   *errorBody `json:"error,omitempty"`
}

type writeResponse struct {
	Results []writeResult `json:"results"`
}

func (s *Server) upsert(w http.ResponseWriter, r *http.Request) {
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
	recs, err := decodeWrite(body, coll.Schema())
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	permit := s.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	defer func() { permit.Done(time.Since(start), false) }()
	results := make([]writeResult, len(recs))
	errs := make([]*coordinator.Error, len(recs))
	for i, res := range s.cfg.Coordinator.Upsert(r.Context(), coll, recs) {
		results[i], errs[i] = toWriteResult(res), res.Err
	}
	st := wire.WriteStatus(errs)
	wire.RetryAfter(w, st)
	wire.WriteJSON(w, st, writeResponse{Results: results})
}

func toWriteResult(res coordinator.WriteResult) writeResult {
	if res.Err == nil {
		return writeResult{ID: res.ID, Status: "ok"}
	}
	_, code := wire.StatusOf(res.Err.Code)
	return writeResult{ID: res.ID, Status: "error", Outcome: res.Outcome, Error: &errorBody{Code: code, Message: res.Err.Msg}}
}

type getResponse struct {
	ID      string          `json:"id"`
	Vector  []float32       `json:"vector"`
	Payload json.RawMessage `json:"payload"`
	Shard   string          `json:"shard"`
	// Sparse are the document's sparse vectors by name, left out when it
	// has none.
	Sparse map[string]sparseVectorJSON `json:"sparse,omitempty"`
	// Vectors are the document's named dense vectors, left out when it
	// has none.
	Vectors map[string][]float32 `json:"vectors,omitempty"`
}

// sparseVectorJSON is a sparse vector in an answer.
type sparseVectorJSON struct {
	Indices []uint32  `json:"indices"`
	Values  []float32 `json:"values"`
}

// pathID is the {id} of /v1/vectors/{id}, unescaped. chi matches on the
// raw path when the client escaped more than Go would (encodeURIComponent
// sends user%3A42), and then hands back the escaped segment.
func pathID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		u, err := url.PathUnescape(id)
		if err != nil {
			return "", wire.Invalid(fmt.Sprintf("id %q is not a valid escaped path segment", id))
		}
		id = u
	}
	if err := wire.CheckID(id); err != nil {
		return "", wire.Invalid(err.Error())
	}
	return id, nil
}

func (s *Server) getVector(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	p, err := s.params(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	coll, err := s.collection(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	permit := s.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	doc, err := s.cfg.Coordinator.Get(r.Context(), coll, id, p.budget)
	permit.Done(time.Since(start), false)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	payload := json.RawMessage(doc.Payload)
	if len(payload) == 0 {
		payload = json.RawMessage("{}") // Qdrant's answer for a point without payload
	}
	out := getResponse{ID: doc.ID, Vector: doc.Vector, Payload: payload, Shard: doc.Shard, Vectors: doc.Named}
	for name, v := range doc.Sparse {
		if out.Sparse == nil {
			out.Sparse = map[string]sparseVectorJSON{}
		}
		out.Sparse[name] = sparseVectorJSON{Indices: v.Indices, Values: v.Values}
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

type deleteResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (s *Server) deleteVector(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	coll, err := s.collection(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	permit := s.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	found, res := s.cfg.Coordinator.Delete(r.Context(), coll, id)
	permit.Done(time.Since(start), false)
	if res.Err != nil {
		st := wire.WriteStatus([]*coordinator.Error{res.Err})
		wire.RetryAfter(w, st)
		wire.WriteJSON(w, st, toWriteResult(res))
		return
	}
	st := "ok"
	if !found {
		st = "not_found"
	}
	wire.WriteJSON(w, http.StatusOK, deleteResponse{ID: id, Status: st})
}
