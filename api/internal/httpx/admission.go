package httpx

import (
	"errors"
	"net/http"
	"time"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/api/internal/wire"
)

// Admission refuses a request on its line and headers when the limiter
// is full, before a byte of its body is read. It reserves nothing: a
// client still sending its body holds no slot, so handlers take theirs
// once the body has arrived (Admit).
func (d Dialect) Admission(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := d.Limiter.Check(); err != nil {
			d.refuse(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Admit takes weight slots (one per query) for a request whose body has
// arrived; on refusal it has answered 429 and returns nil.
func (d Dialect) Admit(w http.ResponseWriter, r *http.Request, weight int, deadline time.Duration) *admission.Permit {
	p, err := d.Limiter.Acquire(weight, deadline)
	if err != nil {
		d.refuse(w, r, err)
		return nil
	}
	return p
}

// refuse answers an admission refusal, as every refusal is answered: 429,
// code overloaded, Retry-After, counted by its reason.
func (d Dialect) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var ref *admission.Refusal
	if errors.As(err, &ref) && d.Metrics != nil {
		d.Metrics.Rejected(ref.Reason)
	}
	w.Header().Set("Retry-After", "1")
	d.Error(w, r, &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeOverloaded, Msg: err.Error()})
	if at := Arrived(r); d.Metrics != nil && !at.IsZero() {
		// The router's own share of a refusal's time: from the request
		// reaching its handler to the 429 handed to the connection's
		// buffer. What a client sees beyond it is the wait for a core
		// before the request was read, and the network.
		d.Metrics.RefusalTime(time.Since(at))
	}
}
