package api

import (
	"encoding/json"
	"net/http"
)

// Error codes of the JSON error body.
const (
	codeInvalid         = "invalid_argument"
	codeUnauthenticated = "unauthenticated"
	codeNotFound        = "not_found"
	codeTooLarge        = "payload_too_large"
	codeOverloaded      = "overloaded"
	codeTimeout         = "request_timeout"
	codeUnavailable     = "unavailable"
	codeConflict        = "failed_precondition"
	codeUnknown         = "outcome_unknown"
	codeInternal        = "internal"
	codeMethod          = "method_not_allowed"
)

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type errorResponse struct {
	Error         errorBody      `json:"error"`
	ScatterGather *scatterGather `json:"scatter_gather,omitempty"`
}

// writeJSON encodes v with status. Encoding errors can only be a client
// gone away, which nothing can answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorResponse{Error: errorBody{Code: code, Message: msg}})
}

// requestError is a client mistake found while decoding or validating.
type requestError struct {
	status int
	code   string
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func invalid(msg string) *requestError {
	return &requestError{status: http.StatusBadRequest, code: codeInvalid, msg: msg}
}
