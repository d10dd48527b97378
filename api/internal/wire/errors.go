package wire

import (
	"net/http"

	"github.com/trawl-search/trawl/coordinator"
)

// Error codes of the native JSON error body. Qdrant's envelope carries no
// code, but its answers are classified by the same ones.
const (
	CodeInvalid         = "invalid_argument"
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeTooLarge        = "payload_too_large"
	CodeOverloaded      = "overloaded"
	CodeTimeout         = "request_timeout"
	CodeUnavailable     = "unavailable"
	CodeConflict        = "failed_precondition"
	// CodeCatalogConflict is a 409 about the catalog: a create of a
	// collection that exists with other settings, of a name that is an
	// alias. CodeConflict stays what a write under another shard list
	// answers.
	CodeCatalogConflict = "conflict"
	CodeUnknown         = "outcome_unknown"
	CodeInternal        = "internal"
	CodeMethod          = "method_not_allowed"
)

// Error is an answer that is not a result: a client mistake found while
// reading, decoding or validating a request, or a refusal. A dialect's
// envelope writes it in its own JSON shape.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Invalid is a 400 invalid_argument.
func Invalid(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalid, Msg: msg}
}

// StatusOf maps a coordinator error code to the HTTP status and error code
// of the contract.
func StatusOf(c coordinator.Code) (int, string) {
	switch c {
	case coordinator.CodeNotFound, coordinator.CodeCollectionNotFound:
		return http.StatusNotFound, CodeNotFound
	case coordinator.CodeInvalid:
		return http.StatusBadRequest, CodeInvalid
	case coordinator.CodeUnavailable:
		return http.StatusServiceUnavailable, CodeUnavailable
	case coordinator.CodeConflict:
		return http.StatusConflict, CodeConflict
	case coordinator.CodeOutcomeUnknown:
		return http.StatusBadGateway, CodeUnknown
	case coordinator.CodeOverloaded:
		return http.StatusTooManyRequests, CodeOverloaded
	}
	return http.StatusInternalServerError, CodeInternal
}
