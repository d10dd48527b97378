package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

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
	body, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	recs, err := decodeWrite(body, schema(s.cfg.Coordinator.Schema()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	permit := s.admit(w, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	defer func() { permit.Done(time.Since(start), false) }()
	results := make([]writeResult, len(recs))
	for i, res := range s.cfg.Coordinator.Upsert(r.Context(), recs) {
		results[i] = toWriteResult(res)
	}
	st := writeStatus(results)
	retryAfter(w, st)
	writeJSON(w, st, writeResponse{Results: results})
}

func toWriteResult(res coordinator.WriteResult) writeResult {
	if res.Err == nil {
		return writeResult{ID: res.ID, Status: "ok"}
	}
	_, code := statusOf(res.Err.Code)
	return writeResult{ID: res.ID, Status: "error", Outcome: res.Outcome, Error: &errorBody{Code: code, Message: res.Err.Msg}}
}

// retryAfter asks the client to come back in a second on a 503: a write
// that no replica could take (a leader election takes about that long).
func retryAfter(w http.ResponseWriter, status int) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
}

// writeStatus is 200 when every id is ok; 502 when any outcome is unknown;
// else the status of the first failure's code.
func writeStatus(results []writeResult) int {
	st := http.StatusOK
	for _, r := range results {
		if r.Error == nil {
			continue
		}
		switch r.Error.Code {
		case codeUnknown:
			return http.StatusBadGateway
		case codeConflict:
			st = http.StatusConflict
		case codeInternal:
			if st == http.StatusOK {
				st = http.StatusInternalServerError
			}
		default:
			if st == http.StatusOK {
				st = http.StatusServiceUnavailable
			}
		}
	}
	return st
}

type getResponse struct {
	ID      string          `json:"id"`
	Vector  []float32       `json:"vector"`
	Payload json.RawMessage `json:"payload"`
	Shard   string          `json:"shard"`
}

// pathID is the {id} of /v1/vectors/{id}, unescaped. chi matches on the
// raw path when the client escaped more than Go would (encodeURIComponent
// sends user%3A42), and then hands back the escaped segment.
func pathID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		u, err := url.PathUnescape(id)
		if err != nil {
			return "", invalid(fmt.Sprintf("id %q is not a valid escaped path segment", id))
		}
		id = u
	}
	if err := checkID(id); err != nil {
		return "", invalid(err.Error())
	}
	return id, nil
}

func (s *Server) getVector(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := s.params(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	permit := s.admit(w, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	doc, err := s.cfg.Coordinator.Get(r.Context(), id, p.budget)
	permit.Done(time.Since(start), false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	payload := json.RawMessage(doc.Payload)
	if len(payload) == 0 {
		payload = json.RawMessage("{}") // Qdrant's answer for a point without payload
	}
	writeJSON(w, http.StatusOK, getResponse{ID: doc.ID, Vector: doc.Vector, Payload: payload, Shard: doc.Shard})
}

type deleteResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (s *Server) deleteVector(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	permit := s.admit(w, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	found, res := s.cfg.Coordinator.Delete(r.Context(), id)
	permit.Done(time.Since(start), false)
	if res.Err != nil {
		wr := toWriteResult(res)
		st := writeStatus([]writeResult{wr})
		retryAfter(w, st)
		writeJSON(w, st, wr)
		return
	}
	st := "ok"
	if !found {
		st = "not_found"
	}
	writeJSON(w, http.StatusOK, deleteResponse{ID: id, Status: st})
}
