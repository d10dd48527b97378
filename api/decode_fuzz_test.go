package api

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
)

// The fuzz schema: small, so the fuzzer reaches valid vectors often.
const fuzzDim = 4

var fuzzSchemas = []schema{
	{Dim: fuzzDim, Metric: vector.Cosine},
	{Dim: fuzzDim, Metric: vector.DotProduct},
	{Dim: fuzzDim, Metric: vector.Euclidean},
}

func fuzzB64(v ...float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// requireRequestError checks a decoder error is a client mistake: a
// *wire.Error answering 400 or 413 with a code and a message.
func requireRequestError(t *testing.T, err error) {
	t.Helper()
	var re *wire.Error
	if !errors.As(err, &re) {
		t.Fatalf("error %T %v is not a *wire.Error", err, err)
	}
	if re.Status != http.StatusBadRequest && re.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d for %v, want 400 or 413", re.Status, err)
	}
	if re.Code == "" || re.Msg == "" {
		t.Fatalf("request error without code or message: %+v", re)
	}
}

// requireValidQuery checks what a successful decode promises the handlers.
func requireValidQuery(t *testing.T, s schema, q query) {
	t.Helper()
	if q.K < 1 || q.K > MaxK {
		t.Fatalf("k = %d, want 1..%d", q.K, MaxK)
	}
	if q.LikeID != "" {
		if q.Vector != nil {
			t.Fatalf("like_id %q with a vector", q.LikeID)
		}
		if len(q.LikeID) > MaxIDBytes {
			t.Fatalf("like_id of %d bytes", len(q.LikeID))
		}
		return
	}
	requireValidVector(t, s, q.Vector)
}

func requireValidVector(t *testing.T, s schema, v []float32) {
	t.Helper()
	if len(v) != s.Dim {
		t.Fatalf("vector of %d dimensions, want %d", len(v), s.Dim)
	}
	zero := true
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			t.Fatalf("element %d is %v", i, f)
		}
		if f != 0 {
			zero = false
		}
	}
	if zero && s.Metric == vector.Cosine {
		t.Fatalf("zero vector accepted under cosine")
	}
}

func addSearchSeeds(f *testing.F) {
	for _, s := range []string{
		`{"vector": [1, 2, 3, 4]}`,
		`{"vector": [1, 2, 3, 4], "k": 1000, "allow_partial": false}`,
		`{"vector": [0, 0, 0, 0]}`,
		`{"vector": [1, 2, 3]}`,
		`{"vector": [1e39, 1, 1, 1]}`,
		`{"vector": [-3.4028234663852886e38, 1, 1, 1]}`,
		`{"vector": [1e-46, 0, 0, 0]}`,
		`{"vector_b64": "` + fuzzB64(1, 2, 3, 4) + `", "k": 3}`,
		`{"vector_b64": "` + strings.TrimRight(fuzzB64(1, 2, 3, 4), "=") + `"}`,
		`{"vector_b64": "` + fuzzB64(float32(math.NaN()), 1, 1, 1) + `"}`,
		`{"vector_b64": "` + fuzzB64(float32(math.Inf(-1)), 1, 1, 1) + `"}`,
		`{"vector_b64": "AAAA"}`,
		`{"like_id": "doc-1", "k": 5}`,
		`{"vector": [1, 2, 3, 4], "using": "text"}`,
		`{"vector": [1, 2, 3, 4], "using": ""}`,
		`{"like_id": ""}`,
		`{"vector": [1, 2, 3, 4], "like_id": "x"}`,
		`{"vector": [1, 2, 3, 4], "k": 1.5}`,
		`{"vector": [1, 2, 3, 4], "k": 0}`,
		`{"vector": [1, 2, 3, 4]} {}`,
		`{"vector": [1, 2, 3, 4], "extra": 1}`,
		`{"vector": null, "like_id": "a"}`,
		`{"k": null, "like_id": "a"}`,
		``, `null`, `[]`, `{`, `"x"`,
	} {
		f.Add([]byte(s))
	}
}

func FuzzDecodeSearch(f *testing.F) {
	addSearchSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range fuzzSchemas {
			q, _, err := decodeSearch(b, s)
			if err != nil {
				requireRequestError(t, err)
				continue
			}
			requireValidQuery(t, s, q)
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	for _, s := range []string{
		`{"queries": [{"vector": [1, 2, 3, 4]}, {"like_id": "a", "k": 2}]}`,
		`{"queries": [{"vector_b64": "` + fuzzB64(1, 0, 0, 0) + `"}], "allow_partial": false}`,
		`{"queries": []}`,
		`{"queries": null}`,
		`{"queries": [{"vector": [1, 2, 3, 4]}, {"vector": [1, 2]}]}`,
		`{"queries": [{"vector": [1, 2, 3, 4], "allow_partial": true}]}`,
		`{"queries": [3]}`,
		`{"queries": [{"vector": [1, 2, 3, 4]}]} x`,
		`{"queries": [{"vector": [1, 2, 3, 4], "k": 1001}]}`,
		`{"queries": [{"vector": [0, 0, 0, 0]}]}`,
		`{"queries": [` + strings.Repeat(`{"like_id": "a"},`, 256) + `{"like_id": "a"}]}`,
		``, `{}`, `{"queries": {}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range fuzzSchemas {
			qs, _, err := decodeBatch(b, s)
			if err != nil {
				requireRequestError(t, err)
				continue
			}
			if len(qs) < 1 || len(qs) > MaxBatch {
				t.Fatalf("%d queries accepted, want 1..%d", len(qs), MaxBatch)
			}
			for _, q := range qs {
				requireValidQuery(t, s, q)
			}
		}
	})
}

func FuzzDecodeWrite(f *testing.F) {
	for _, s := range []string{
		`{"vectors": [{"id": "a", "vector": [1, 2, 3, 4]}, {"id": "b", "vector_b64": "` + fuzzB64(0, 0, 0, 1) + `"}]}`,
		`{"vectors": [{"id": "a", "vector": [1, 2, 3, 4]}, {"id": "a", "vector": [1, 2, 3, 4]}]}`,
		`{"vectors": [{"id": "", "vector": [1, 2, 3, 4]}]}`,
		`{"vectors": [{"id": "` + strings.Repeat("x", 257) + `", "vector": [1, 2, 3, 4]}]}`,
		`{"vectors": [{"vector": [1, 2, 3, 4]}]}`,
		`{"vectors": [{"id": "a"}]}`,
		`{"vectors": [{"id": "a", "vector": [1, 2, 3, 4], "vector_b64": "AAAA"}]}`,
		`{"vectors": [{"id": "a", "vector": [0, 0, 0, 0]}]}`,
		`{"vectors": [{"id": "a", "vector": [1e39, 0, 0, 0]}]}`,
		`{"vectors": [{"id": "a", "vector_b64": "` + fuzzB64(float32(math.NaN()), 0, 0, 0) + `"}]}`,
		`{"vectors": [{"id": "a", "vector": [1, 2, 3, 4], "k": 1}]}`,
		`{"vectors": []}`,
		`{"vectors": [{"id": "a", "vector": [1, 2, 3, 4]}]} {}`,
		`{"vectors": [{"id": "a", "vector": [1, 2, 3, 4], "vectors": {"text": [1, 2]}}]}`,
		`{"vectors": [{"id": "a", "vectors": {"text": [1, 2]}}]}`,
		``, `{}`, `{"vectors": [null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range fuzzSchemas {
			recs, err := decodeWrite(b, s)
			if err != nil {
				requireRequestError(t, err)
				continue
			}
			if len(recs) < 1 || len(recs) > MaxWriteBatch {
				t.Fatalf("%d vectors accepted, want 1..%d", len(recs), MaxWriteBatch)
			}
			seen := map[string]bool{}
			for _, r := range recs {
				if len(r.ID) < 1 || len(r.ID) > MaxIDBytes {
					t.Fatalf("id of %d bytes accepted", len(r.ID))
				}
				if seen[r.ID] {
					t.Fatalf("duplicate id %q accepted", r.ID)
				}
				seen[r.ID] = true
				requireValidVector(t, s, r.Vector)
			}
		}
	})
}

// FuzzDecodeEdit: the native edits' bodies (PATCH's payload, PUT's
// vector) are refused with a 400 or decode to what a shard applies as
// it is: a payload within the limits, a vector of the collection's
// dimension.
func FuzzDecodeEdit(f *testing.F) {
	for _, s := range []string{
		`{"payload": {"a": 1, "b": {"c": [1, "x", null]}}}`, `{"payload": 3}`, `{"payload": {}}`, `{}`, `{"payload": {"a": 1}, "x": 1}`,
		`{"vector": [1, 2, 3, 4]}`, `{"vector_b64": "` + fuzzB64(1, 0, 0, 0) + `"}`, `{"vector": [1, 2]}`, `{"vector": [0, 0, 0, 0]}`,
		`{"vector": [1, 2, 3, 4], "vector_b64": "AAAA"}`, `{"vector": [1e39, 0, 0, 0]}`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if pl, err := decodePatch(b); err != nil {
			requireRequestError(t, err)
		} else if _, err := filter.CheckPayload(pl); err != nil {
			t.Fatalf("payload %s accepted: %v", pl, err)
		}
		for _, s := range fuzzSchemas {
			v, err := decodePutVector(b, s)
			if err != nil {
				requireRequestError(t, err)
				continue
			}
			if len(v) != s.Dim {
				t.Fatalf("vector of %d accepted, want %d", len(v), s.Dim)
			}
		}
	})
}
