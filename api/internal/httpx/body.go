package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/trawl-search/trawl/api/internal/wire"
)

// MaxBodyBytes is the largest request body either dialect reads.
const MaxBodyBytes = 8 << 20

type ctxKey int

const (
	requestIDKey ctxKey = iota
	connKey             // the request's *arrival
	scopeKey            // the apikey.Scope of the request's key (Auth)
)

// arrival is what KeepConn notes about a request as it enters the router.
type arrival struct {
	rc *http.ResponseController
	at time.Time
}

// KeepConn keeps a ResponseController for the connection before any
// middleware wraps w (otelhttp's wrapper cannot be unwrapped), so
// ReadBody can set the connection's read deadline whatever wraps w later,
// and notes when the request reached the router's handler, so a refusal's
// own time is measured from there (Arrived). It goes outside everything
// else.
func KeepConn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := &arrival{rc: http.NewResponseController(w), at: time.Now()}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), connKey, a)))
	})
}

// Arrived is when r entered the router's handler (KeepConn), or the zero
// time when KeepConn did not see it.
func Arrived(r *http.Request) time.Time {
	if a, ok := r.Context().Value(connKey).(*arrival); ok {
		return a.at
	}
	return time.Time{}
}

// ReadBody reads the whole body within the body timeout, refusing more
// than MaxBodyBytes with 413 and a body that does not arrive in time with
// 408 (closing the connection: what is left of the body is unread).
func (d Dialect) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var rc *http.ResponseController
	if a, ok := r.Context().Value(connKey).(*arrival); ok {
		rc = a.rc
	} else {
		rc = http.NewResponseController(w)
	}
	// Not every ResponseWriter supports deadlines (httptest's recorder);
	// there the server's own timeouts are all there is.
	deadlined := rc.SetReadDeadline(time.Now().Add(d.BodyTimeout)) == nil
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if deadlined && err == nil {
		// Cleared only after a whole body: after a timeout the deadline
		// stays passed, so the server's attempt to drain the unread rest
		// (for connection reuse) fails at once instead of waiting on the
		// slow client.
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, &wire.Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeTooLarge,
				Msg: fmt.Sprintf("request body is over %d bytes", MaxBodyBytes)}
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			return nil, &wire.Error{Status: http.StatusRequestTimeout, Code: wire.CodeTimeout,
				Msg: fmt.Sprintf("request body did not arrive within --body-timeout=%s", d.BodyTimeout)}
		}
		return nil, wire.Invalid("reading request body: " + err.Error())
	}
	return b, nil
}
