package qdrant

import (
	"net/http"
	"time"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
)

// okBody is Qdrant's answer envelope, with trawl's scatter_gather beside
// result when the answer read documents from shards.
type okBody struct {
	Result        any                 `json:"result"`
	Status        string              `json:"status"`
	Time          float64             `json:"time"`
	ScatterGather *wire.ScatterGather `json:"scatter_gather,omitempty"`
}

type errorStatus struct {
	Error string `json:"error"`
}

// errorBody is Qdrant's error envelope; scatter_gather is there when a
// fan-out ran (a refused degraded answer).
type errorBody struct {
	Status        errorStatus         `json:"status"`
	Time          float64             `json:"time"`
	ScatterGather *wire.ScatterGather `json:"scatter_gather,omitempty"`
}

// elapsed is Qdrant's "time": seconds since the request arrived.
func elapsed(r *http.Request) float64 {
	t, ok := r.Context().Value(startKey).(time.Time)
	if !ok {
		return 0
	}
	return time.Since(t).Seconds()
}

// answer writes a result in Qdrant's envelope; with sg, the fan-out's
// scatter_gather goes beside it and its verdict in X-Trawl-Degraded.
func answer(w http.ResponseWriter, r *http.Request, result any, sg *wire.ScatterGather) {
	if sg != nil {
		wire.SetDegraded(w, *sg)
	}
	wire.WriteJSON(w, http.StatusOK, okBody{Result: result, Status: "ok", Time: elapsed(r), ScatterGather: sg})
}

// envelope is Qdrant's error shape, {"status": {"error": ...},
// "time": s}, its message led by Qdrant's wording for the kind of error
// ("Bad request: ..."). A 503 asks the client to come back in a second.
func envelope(w http.ResponseWriter, r *http.Request, e *wire.Error, sg *wire.ScatterGather) {
	wire.RetryAfter(w, e.Status)
	wire.WriteJSON(w, e.Status, errorBody{Status: errorStatus{Error: qdrantx.Prefix(e.Status) + e.Msg}, Time: elapsed(r), ScatterGather: sg})
}
