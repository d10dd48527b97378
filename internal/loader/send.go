package loader

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// batch is the records [start, start+len(ids)) of the input, each already
// encoded as one entry of POST /v1/vectors' "vectors" list.
type batch struct {
	start   int64
	ids     []string
	entries [][]byte
}

const (
	bodyHead = `{"vectors":[`
	bodyTail = `]}`
)

// appendEntry appends rec as a /v1/vectors entry. The body is written by
// hand rather than with json.Marshal so the payload goes out byte for byte
// as the input had it (Marshal would compact and HTML-escape a RawMessage),
// and the vector as "vector_b64": base64 of little-endian float32, which
// is what the router's decoder takes, at a third of the size of decimal
// numbers.
func appendEntry(b []byte, rec Record) []byte {
	id, _ := json.Marshal(rec.ID) // a string always marshals
	b = append(b, `{"id":`...)
	b = append(b, id...)
	b = append(b, `,"vector_b64":"`...)
	b = base64.StdEncoding.AppendEncode(b, rec.Vector)
	b = append(b, '"')
	if len(rec.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, rec.Payload...)
	}
	return append(b, '}')
}

// bodySize is the size of a request body holding entries of n total bytes.
func bodySize(entries, n int) int {
	return len(bodyHead) + n + max(entries-1, 0) + len(bodyTail)
}

// body is the request for the batch's records at the indexes in pending.
func (b *batch) body(pending []int) []byte {
	n := 0
	for _, i := range pending {
		n += len(b.entries[i])
	}
	out := make([]byte, 0, bodySize(len(pending), n))
	out = append(out, bodyHead...)
	for k, i := range pending {
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, b.entries[i]...)
	}
	return append(out, bodyTail...)
}

// errorJSON is the router's error object, alone or per id.
type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *errorJSON) String() string { return e.Code + ": " + e.Message }

type resultJSON struct {
	ID      string     `json:"id"`
	Status  string     `json:"status"`
	Outcome string     `json:"outcome"`
	Error   *errorJSON `json:"error"`
}

// answer is the router's answer to one POST /v1/vectors.
type answer struct {
	status     int
	retryAfter time.Duration // 0 when absent
	Error      *errorJSON    `json:"error"`
	Results    []resultJSON  `json:"results"`
	raw        []byte
}

// message is the best human text in an error answer: the router's error
// message, else the first failed id's, else the body itself.
func (a *answer) message() string {
	if a.Error != nil {
		return a.Error.Message
	}
	for _, r := range a.Results {
		if r.Error != nil {
			return fmt.Sprintf("id %q: %s", r.ID, r.Error)
		}
	}
	if s := strings.TrimSpace(string(a.raw)); s != "" {
		return s
	}
	return http.StatusText(a.status)
}

// maxAnswer bounds how much of an answer is read: results for 256 ids with
// their messages fit many times over.
const maxAnswer = 4 << 20

// post sends one request and reads its answer. A transport error (no
// answer) is returned as an error; any HTTP answer is an answer.
func (l *loader) post(ctx context.Context, body []byte) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "trawl-load")
	if l.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.cfg.APIKey)
	}
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer (%s): %w", resp.Status, err)
	}
	a := &answer{status: resp.StatusCode, raw: raw, retryAfter: l.retryAfter(resp.Header.Get("Retry-After"))}
	// Not every answer is the router's JSON (a proxy's 502 page): then
	// only the status and the raw text say anything.
	_ = json.Unmarshal(raw, a)
	return a, nil
}

// maxRetryAfter caps how long one Retry-After can make a worker wait.
const maxRetryAfter = time.Minute

func (l *loader) retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		return min(time.Duration(max(s, 0))*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(t.Sub(l.cfg.Clock.Now()), 0), maxRetryAfter)
	}
	return 0
}

// retryable is whether a whole answer asks for the request again: the
// router overloaded (429) or without a leader for some shard (503), a
// body that arrived too slowly (408), or a gateway's failure in between
// (502, 504; the router's own 502 is a write whose outcome is unknown).
func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is how long to wait before attempt+1: the router's Retry-After
// when it gave one, else exponential from 250 ms up to 8 s; either way
// with random jitter on top so that workers refused together do not all
// come back in the same instant.
func backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter + rand.N(retryAfter/4+1)
	}
	d := min(250*time.Millisecond<<min(attempt-1, 5), 8*time.Second)
	return d/2 + rand.N(d/2+1)
}

// FatalError is an answer that retrying cannot change (a 4xx other than
// 408 and 429: bad input, a wrong API key, a shard list mismatch; or a
// certificate this client does not trust), or a batch still refused after
// every attempt. The load stops.
type FatalError struct {
	First, End int64 // the batch's records, [First, End)
	Reason     string
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("records %d..%d: %s", e.First, e.End-1, e.Reason)
}

func (b *batch) fatal(format string, args ...any) *FatalError {
	return &FatalError{First: b.start, End: b.start + int64(len(b.ids)), Reason: fmt.Sprintf(format, args...)}
}

func statusLine(code int) string { return fmt.Sprintf("%d %s", code, http.StatusText(code)) }

var entryIndex = regexp.MustCompile(`^vectors\[(\d+)\]`)

// recordMessage names the input record behind a validation message about
// "vectors[i]" of the request that carried pending.
func recordMessage(msg string, b *batch, pending []int) string {
	m := entryIndex.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	i, err := strconv.Atoi(m[1])
	if err != nil || i >= len(pending) {
		return msg
	}
	k := pending[i]
	return fmt.Sprintf("%s (record %d, id %q)%s", m[0], b.start+int64(k), b.ids[k], msg[len(m[0]):])
}

// send upserts one batch until every record is acknowledged or has failed
// for good, the batch is refused for good (a *FatalError), or ctx is done
// (an interrupt, or another worker's fatal error), whichever comes first.
// Records that neither were acknowledged nor failed stay unacknowledged,
// so the resume offset stays below them.
//
// Retrying is safe because every entry is a keyed upsert of the same id
// with the same bytes: applying one twice leaves the same stored document
// as applying it once. That is why a transport error or a 502 (the write
// may or may not have been committed — the router itself never replays
// it, DESIGN.md "Writes") can be sent again here: the client retry the
// router's message invites. Deletes or conditional writes would not allow
// this; the loader sends neither.
func (l *loader) send(ctx context.Context, b *batch) error {
	pending := make([]int, len(b.ids))
	for i := range pending {
		pending[i] = i
	}
	acked := make([]bool, len(b.ids))
	defer func() { l.t.settle(b, acked) }()
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return nil // interrupted: what is pending stays unacknowledged
		}
		if attempt == 1 {
			l.t.sent(len(b.ids))
		}
		// The request outlives an interrupt (it gets its own timeout
		// instead): a batch already on its way is better finished and
		// acknowledged than abandoned with its outcome unknown.
		start := l.cfg.Clock.Now()
		a, err := l.post(context.WithoutCancel(ctx), b.body(pending))
		var why string
		var wait time.Duration
		switch {
		case err != nil && untrusted(err):
			return b.fatal("the router's certificate is not trusted (is --tls-ca its CA?): %v", err)
		case err != nil:
			why = err.Error()
		case a.status/100 == 2:
			l.t.latency(l.cfg.Clock.Now().Sub(start))
			l.apply(b, pending, acked, a, false)
			return nil
		case retryable(a.status):
			pending = l.apply(b, pending, acked, a, true)
			if len(pending) == 0 {
				return nil
			}
			why, wait = statusLine(a.status)+": "+a.message(), a.retryAfter
		case a.status/100 == 4:
			return b.fatal("router answered %s: %s", statusLine(a.status), recordMessage(a.message(), b, pending))
		default:
			// A 500 or the like: each id's reason is in the answer, and
			// sending the same ids again would meet the same reason.
			l.apply(b, pending, acked, a, false)
			return nil
		}
		if attempt >= l.cfg.MaxAttempts {
			return b.fatal("gave up after %d attempts: %s", attempt, why)
		}
		if ctx.Err() != nil {
			return nil // interrupted: no new attempt
		}
		d := backoff(attempt, wait)
		l.cfg.Logger.Warn("retrying a batch", "first", b.start, "records", len(pending),
			"attempt", attempt+1, "after", d, "because", why)
		if err := l.cfg.Clock.Sleep(ctx, d); err != nil {
			return nil
		}
		l.t.retry()
	}
}

// apply records an answer's per-id results for the records in pending.
// An id answered "ok" is acknowledged. With retry set, the others are
// returned to be sent again; without, each counts as failed with its
// reason (or as missing from the answer).
func (l *loader) apply(b *batch, pending []int, acked []bool, a *answer, retry bool) []int {
	byID := make(map[string]*resultJSON, len(a.Results))
	for i := range a.Results {
		byID[a.Results[i].ID] = &a.Results[i]
	}
	var again []int
	for _, i := range pending {
		r := byID[b.ids[i]]
		switch {
		case r != nil && r.Status == "ok":
			acked[i] = true
		case retry:
			again = append(again, i)
		case r != nil && r.Error != nil:
			l.t.fail(b.start+int64(i), b.ids[i], fmt.Sprintf("%d %s", a.status, r.Error))
		case r != nil:
			l.t.fail(b.start+int64(i), b.ids[i], fmt.Sprintf("%d status %q", a.status, r.Status))
		default:
			l.t.fail(b.start+int64(i), b.ids[i], fmt.Sprintf("%d with no result for this id: %s", a.status, a.message()))
		}
	}
	return again
}

var errInterrupted = errors.New("load interrupted")

// untrusted is whether a transport error is the router's certificate
// failing verification: no retry changes that.
func untrusted(err error) bool {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
	)
	return errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr)
}
