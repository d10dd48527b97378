package httpx

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/metrics"
)

// DefaultBodyTimeout is --body-timeout's default.
const DefaultBodyTimeout = 10 * time.Second

// An Envelope writes an error answer in one dialect's JSON shape. sg, when
// not nil, is the scatter_gather block of the fan-out that ran, which
// every dialect puts beside the error.
type Envelope func(w http.ResponseWriter, r *http.Request, e *wire.Error, sg *wire.ScatterGather)

// Dialect is the shared request handling as one dialect applies it: the
// router's key, limiter, metrics, logger and body timeout (the same for
// every dialect), and the dialect's envelope.
type Dialect struct {
	// Envelope writes this dialect's errors.
	Envelope Envelope
	// Keys, when not nil, are the API keys a request must present (Auth),
	// as a Bearer token or, when KeyHeader is set, in that header (Qdrant
	// clients send api-key), and what each may read or write (Scope).
	Keys      *apikey.Keyring
	KeyHeader string
	// DefaultCollection is what a route without {collection} acts on
	// (router serve --collection), for Scope.
	DefaultCollection string
	// Limiter admits requests.
	Limiter *admission.Limiter
	// Metrics counts admission refusals; nil counts nothing.
	Metrics *metrics.Router
	// Logger logs internal errors; nil logs nothing.
	Logger *slog.Logger
	// BodyTimeout bounds the time from the end of a request's headers to
	// the end of its body (ReadBody).
	BodyTimeout time.Duration
	// Backups is the router's backup storage (nil: none configured).
	Backups *Backups
}

// Error writes e through the envelope.
func (d Dialect) Error(w http.ResponseWriter, r *http.Request, e *wire.Error) {
	d.Envelope(w, r, e, nil)
}

// Fail writes err through the envelope: a *wire.Error as itself, a
// coordinator error with the status its code maps to, anything else as a
// 500 that says no more than it must (and is logged). With sg, the answer
// also says in X-Trawl-Degraded whether the fan-out was degraded.
func (d Dialect) Fail(w http.ResponseWriter, r *http.Request, err error, sg *wire.ScatterGather) {
	e := &wire.Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Msg: err.Error()}
	var we *wire.Error
	var ce *coordinator.Error
	switch {
	case errors.As(err, &we):
		e = we
	case errors.As(err, &ce) && ce.Code != coordinator.CodeInternal:
		e.Status, e.Code = wire.StatusOf(ce.Code)
		e.Msg = ce.Msg
	default:
		if d.Logger != nil {
			d.Logger.ErrorContext(r.Context(), "internal error", "err", err)
		}
	}
	if sg != nil {
		wire.SetDegraded(w, *sg)
	}
	d.Envelope(w, r, e, sg)
}
