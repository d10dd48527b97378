package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"time"

	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
)

// Limits of the request contract.
const (
	MaxBodyBytes  = 8 << 20
	MaxK          = vector.MaxK
	DefaultK      = 10
	MaxBatch      = 256
	MaxWriteBatch = 256
	MaxIDBytes    = 256
)

// readBody reads the whole body within the body timeout, refusing more
// than MaxBodyBytes with 413 and a body that does not arrive in time with
// 408 (closing the connection: what is left of the body is unread).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc, ok := r.Context().Value(connKey).(*http.ResponseController)
	if !ok {
		rc = http.NewResponseController(w)
	}
	// Not every ResponseWriter supports deadlines (httptest's recorder);
	// there the server's own timeouts are all there is.
	deadlined := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) == nil
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
			return nil, &requestError{status: http.StatusRequestEntityTooLarge, code: codeTooLarge,
				msg: fmt.Sprintf("request body is over %d bytes", MaxBodyBytes)}
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			return nil, &requestError{status: http.StatusRequestTimeout, code: codeTimeout,
				msg: fmt.Sprintf("request body did not arrive within --body-timeout=%s", s.cfg.BodyTimeout)}
		}
		return nil, invalid("reading request body: " + err.Error())
	}
	return b, nil
}

// decodeStrict decodes exactly one JSON value into v: unknown fields and
// trailing data are errors.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return invalid("request body is empty, want a JSON object")
		}
		return invalid("bad JSON: " + err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("bad JSON: trailing data after the request object")
	}
	return nil
}

// schema is the cluster's dimension and metric, learned from the shards.
type schema coordinator.Schema

// checkVector validates a decoded vector against the schema.
func (s schema) checkVector(v []float32) error {
	if len(v) != s.Dim {
		return invalid(fmt.Sprintf("vector has %d dimensions, want %d", len(v), s.Dim))
	}
	zero := true
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return invalid(fmt.Sprintf("vector element %d is %v, want a finite float32", i, f))
		}
		if f != 0 {
			zero = false
		}
	}
	if zero && s.Metric == vector.Cosine {
		return invalid("vector is all zeros, which has no direction under the cosine metric")
	}
	return nil
}

// fromJSONNumbers narrows JSON numbers to float32, refusing values beyond
// float32's range (which would silently become ±Inf).
func fromJSONNumbers(xs []float64) ([]float32, error) {
	v := make([]float32, len(xs))
	for i, x := range xs {
		if math.Abs(x) > math.MaxFloat32 {
			return nil, invalid(fmt.Sprintf("vector element %d is %g, beyond the float32 range", i, x))
		}
		v[i] = float32(x)
	}
	return v, nil
}

// fromBase64 decodes base64 (standard, padded or not) little-endian float32.
func fromBase64(s string) ([]float32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, invalid("vector_b64 is not valid base64: " + err.Error())
	}
	v, err := vector.DecodeLE(b)
	if err != nil {
		return nil, invalid("vector_b64: " + err.Error())
	}
	return v, nil
}

// queryJSON is one query of /v1/search or of a batch.
type queryJSON struct {
	Vector    []float64 `json:"vector"`
	VectorB64 *string   `json:"vector_b64"`
	LikeID    *string   `json:"like_id"`
	K         *int      `json:"k"`
	// Exact, Oversample and NProbe are accepted whatever the shards run
	// (DESIGN.md); shards ignore what does not apply to them (nprobe on a
	// flat shard, oversample on a float32 one).
	Exact      *bool `json:"exact"`
	Oversample *int  `json:"oversample"`
	NProbe     *int  `json:"nprobe"`
	// Filter is Qdrant's filter JSON (package filter), checked whole.
	Filter         json.RawMessage `json:"filter"`
	ScoreThreshold *float64        `json:"score_threshold"`
	// WithPayload is true, false or a list of top-level keys.
	WithPayload json.RawMessage `json:"with_payload"`
}

// MaxOversample is the largest "oversample" a query may ask for.
const MaxOversample = 32

// MaxNProbe is the largest "nprobe" sent to shards, ivf.MaxLists: no shard
// has more lists, and a larger nprobe probes every list anyway.
const MaxNProbe = 65536

type searchJSON struct {
	queryJSON
	AllowPartial *bool `json:"allow_partial"`
}

type batchJSON struct {
	Queries      []json.RawMessage `json:"queries"`
	AllowPartial *bool             `json:"allow_partial"`
}

// query is a validated query: either a vector or a stored id to look up.
type query = coordinator.Query

// validate checks a decoded query completely.
func (q queryJSON) validate(s schema) (query, error) {
	n := 0
	if q.Vector != nil {
		n++
	}
	if q.VectorB64 != nil {
		n++
	}
	if q.LikeID != nil {
		n++
	}
	if n != 1 {
		return query{}, invalid(`give exactly one of "vector", "vector_b64" or "like_id"`)
	}
	out := query{K: DefaultK}
	if q.K != nil {
		if *q.K < 1 || *q.K > MaxK {
			return query{}, invalid(fmt.Sprintf("k is %d, want 1..%d", *q.K, MaxK))
		}
		out.K = *q.K
	}
	if q.Exact != nil {
		out.Exact = *q.Exact
	}
	if q.Oversample != nil {
		if *q.Oversample < 1 || *q.Oversample > MaxOversample {
			return query{}, invalid(fmt.Sprintf("oversample is %d, want 1..%d", *q.Oversample, MaxOversample))
		}
		out.Oversample = *q.Oversample
	}
	if q.NProbe != nil {
		if *q.NProbe < 1 {
			return query{}, invalid(fmt.Sprintf("nprobe is %d, want at least 1", *q.NProbe))
		}
		// More lists than a shard has probes them all; the cap only keeps
		// the number inside the wire's uint32.
		out.NProbe = min(*q.NProbe, MaxNProbe)
	}
	if isSet(q.Filter) {
		f, err := filter.Parse(q.Filter)
		if err != nil {
			return query{}, invalid(err.Error())
		}
		out.Filter = f
	}
	out.ScoreThreshold = q.ScoreThreshold
	sel, err := decodeWithPayload(q.WithPayload)
	if err != nil {
		return query{}, err
	}
	out.WithPayload = sel
	switch {
	case q.LikeID != nil:
		if err := checkID(*q.LikeID); err != nil {
			return query{}, invalid("like_id: " + err.Error())
		}
		out.LikeID = *q.LikeID
		return out, nil
	case q.VectorB64 != nil:
		out.Vector, err = fromBase64(*q.VectorB64)
	default:
		out.Vector, err = fromJSONNumbers(q.Vector)
	}
	if err != nil {
		return query{}, err
	}
	if err := s.checkVector(out.Vector); err != nil {
		return query{}, err
	}
	return out, nil
}

// isSet reports whether an optional JSON member was given and not null.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// decodeWithPayload reads with_payload: true (all of the payload), false
// or absent (none), or a list of top-level keys.
func decodeWithPayload(raw json.RawMessage) (*coordinator.PayloadSelection, error) {
	if !isSet(raw) {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		if !b {
			return nil, nil
		}
		return &coordinator.PayloadSelection{All: true}, nil
	}
	var keys []string
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, invalid("with_payload is " + jsonKind(raw) + ", want true, false or a list of top-level keys")
	}
	for i, k := range keys {
		if k == "" {
			return nil, invalid(fmt.Sprintf("with_payload[%d] is empty, want a top-level payload key", i))
		}
	}
	if keys == nil {
		keys = []string{}
	}
	return &coordinator.PayloadSelection{Keys: keys}, nil
}

// jsonKind names the JSON type of a raw value for an error.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "empty"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array that is not all strings"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

func checkID(id string) error {
	if len(id) < 1 || len(id) > MaxIDBytes {
		return fmt.Errorf("id is %d bytes, want 1..%d", len(id), MaxIDBytes)
	}
	return nil
}

// decodeSearch decodes and validates a /v1/search body.
func decodeSearch(b []byte, s schema) (query, bool, error) {
	var req searchJSON
	if err := decodeStrict(b, &req); err != nil {
		return query{}, false, err
	}
	q, err := req.validate(s)
	return q, req.AllowPartial == nil || *req.AllowPartial, err
}

// decodeBatch decodes and validates a /v1/search/batch body; an error names
// the index of the first bad query.
func decodeBatch(b []byte, s schema) ([]query, bool, error) {
	var req batchJSON
	if err := decodeStrict(b, &req); err != nil {
		return nil, false, err
	}
	if len(req.Queries) < 1 || len(req.Queries) > MaxBatch {
		return nil, false, invalid(fmt.Sprintf("queries has %d entries, want 1..%d", len(req.Queries), MaxBatch))
	}
	qs := make([]query, len(req.Queries))
	for i, raw := range req.Queries {
		var qj queryJSON
		if err := decodeStrict(raw, &qj); err != nil {
			return nil, false, invalid(fmt.Sprintf("queries[%d]: %v", i, err))
		}
		q, err := qj.validate(s)
		if err != nil {
			return nil, false, invalid(fmt.Sprintf("queries[%d]: %v", i, err))
		}
		qs[i] = q
	}
	return qs, req.AllowPartial == nil || *req.AllowPartial, nil
}

type writeJSONReq struct {
	Vectors []json.RawMessage `json:"vectors"`
}

type vectorJSON struct {
	ID        *string         `json:"id"`
	Vector    []float64       `json:"vector"`
	VectorB64 *string         `json:"vector_b64"`
	Payload   json.RawMessage `json:"payload"`
}

type record = coordinator.Record

// decodeWrite decodes and validates a /v1/vectors body, all or nothing.
func decodeWrite(b []byte, s schema) ([]record, error) {
	var req writeJSONReq
	if err := decodeStrict(b, &req); err != nil {
		return nil, err
	}
	if len(req.Vectors) < 1 || len(req.Vectors) > MaxWriteBatch {
		return nil, invalid(fmt.Sprintf("vectors has %d entries, want 1..%d", len(req.Vectors), MaxWriteBatch))
	}
	out := make([]record, len(req.Vectors))
	seen := make(map[string]int, len(req.Vectors))
	for i, raw := range req.Vectors {
		var vj vectorJSON
		if err := decodeStrict(raw, &vj); err != nil {
			return nil, invalid(fmt.Sprintf("vectors[%d]: %v", i, err))
		}
		if vj.ID == nil {
			return nil, invalid(fmt.Sprintf(`vectors[%d]: missing "id"`, i))
		}
		if err := checkID(*vj.ID); err != nil {
			return nil, invalid(fmt.Sprintf("vectors[%d]: %v", i, err))
		}
		if j, dup := seen[*vj.ID]; dup {
			return nil, invalid(fmt.Sprintf("vectors[%d]: id %q repeats vectors[%d]", i, *vj.ID, j))
		}
		seen[*vj.ID] = i
		var (
			v   []float32
			err error
		)
		switch {
		case (vj.Vector != nil) == (vj.VectorB64 != nil):
			err = invalid(`give exactly one of "vector" or "vector_b64"`)
		case vj.VectorB64 != nil:
			v, err = fromBase64(*vj.VectorB64)
		default:
			v, err = fromJSONNumbers(vj.Vector)
		}
		if err == nil {
			err = s.checkVector(v)
		}
		if err != nil {
			return nil, invalid(fmt.Sprintf("vectors[%d]: %v", i, err))
		}
		out[i] = record{ID: *vj.ID, Vector: v}
		if isSet(vj.Payload) {
			p, err := filter.CheckPayload(vj.Payload)
			if err != nil {
				return nil, invalid(fmt.Sprintf("vectors[%d]: %v", i, err))
			}
			out[i].Payload = p
		}
	}
	return out, nil
}
