package wire

import (
	"net/http"

	"github.com/trawl-search/trawl/coordinator"
)

// WriteStatus is a write answer's status from its ids' errors (nil: that
// id is written): 200 when none failed; 502 when any outcome is unknown
// (the client must look before it retries); 409 on a conflict; else the
// status of the first failure, 500 or 503.
func WriteStatus(errs []*coordinator.Error) int {
	st := http.StatusOK
	for _, e := range errs {
		if e == nil {
			continue
		}
		switch _, code := StatusOf(e.Code); code {
		case CodeUnknown:
			return http.StatusBadGateway
		case CodeConflict:
			st = http.StatusConflict
		case CodeNotFound:
			if st == http.StatusOK {
				st = http.StatusNotFound
			}
		case CodeInternal:
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

// RetryAfter asks the client to come back in a second on a 503 (a write
// that no replica could take: a leader election takes about that long; a
// collection still being created) and on a 429 (overloaded).
func RetryAfter(w http.ResponseWriter, status int) {
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
}
