package api

import (
	"net/http"

	"github.com/trawl-search/trawl/api/internal/wire"
)

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type errorResponse struct {
	Error         errorBody           `json:"error"`
	ScatterGather *wire.ScatterGather `json:"scatter_gather,omitempty"`
}

// envelope is the native dialect's error shape (DESIGN.md, "Other
// endpoints"): {"error": {"code", "message"}}, with the fan-out's
// scatter_gather beside it when one ran. A 503 asks the client to come
// back in a second (a collection still being created, a leader election).
func envelope(w http.ResponseWriter, _ *http.Request, e *wire.Error, sg *wire.ScatterGather) {
	wire.RetryAfter(w, e.Status)
	wire.WriteJSON(w, e.Status, errorResponse{Error: errorBody{Code: e.Code, Message: e.Msg}, ScatterGather: sg})
}
