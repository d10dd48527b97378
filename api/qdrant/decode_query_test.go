package qdrant

import (
	"errors"
	"net/http"
	"testing"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/vector"
)

// FuzzDecodeQuery: points/query's decoder, prefetch trees included,
// either refuses a body with a 400 or returns a query whose every stage
// the coordinator can run: a limit in range, a vector of the
// collection's dimension (or an id, or a recommendation) on every
// non-fusion stage, prefetches under every fusion, nesting within
// Qdrant's limit.
func FuzzDecodeQuery(f *testing.F) {
	for _, s := range []string{
		`{"query": [1, 0]}`, `{"query": {"nearest": [1, 0]}, "limit": 3, "offset": 1}`,
		`{"prefetch": {"query": [1, 0]}, "query": {"fusion": "rrf"}}`,
		`{"prefetch": [{"query": [1, 0], "limit": 5, "filter": {"must": [{"key": "a", "match": {"value": 1}}]}}, {"query": [0, 1], "score_threshold": 0.5}], "query": {"fusion": "dbsf"}, "limit": 2}`,
		`{"prefetch": {"prefetch": [{"query": [1, 0]}, {"query": 7}], "query": {"rrf": {"k": 60, "weights": [1, 2]}}, "limit": 20}, "query": [0, 1], "with_payload": true}`,
		`{"prefetch": {"prefetch": {"query": [1, 0]}}, "query": {"fusion": "rrf"}}`,
		`{"prefetch": [{"query": {"fusion": "rrf"}}], "query": {"fusion": "rrf"}}`,
		`{"prefetch": [{"query": [1, 0], "offset": 2}], "query": {"fusion": "rrf"}}`,
		`{"prefetch": 3, "query": {"fusion": "max"}}`, `{"query": {"fusion": "rrf"}}`, `{"query": {"rrf": {"k": 0}}}`,
		`{"prefetCh": [{"": [1, 0], "": 2}], "query": {}}`, // encoding/json matches members regardless of case
		`{"prefetch": [], "query": [1, 0]}`, `{"prefetch": null, "query": [1, 0]}`, ``, `{}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	sch := coordinator.Schema{Dim: 2, Metric: vector.Cosine}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := decodeQuery(b, sch)
		if err != nil {
			var we *wire.Error
			if !errors.As(err, &we) || we.Status != http.StatusBadRequest {
				t.Fatalf("error %v (%T), want a 400", err, err)
			}
			return
		}
		if q.tree == nil {
			requireRunnable(t, sch, &coordinator.Stage{Query: q.q}, 0)
			return
		}
		if q.tree.Query.K != q.q.K {
			t.Fatalf("the root's limit %d differs from the query's %d", q.tree.Query.K, q.q.K)
		}
		requireRunnable(t, sch, q.tree, 0)
	})
}

func requireRunnable(t *testing.T, sch coordinator.Schema, st *coordinator.Stage, depth int) {
	t.Helper()
	q := st.Query
	switch {
	case depth > coordinator.MaxPrefetchDepth:
		t.Fatalf("%s: nested %d deep", st.Name, depth)
	case q.K < 1 || q.K > vector.MaxK:
		t.Fatalf("%s: limit %d accepted", st.Name, q.K)
	case st.Fusion != nil && len(st.Prefetch) == 0:
		t.Fatalf("%s: a fusion without prefetch accepted", st.Name)
	case st.Fusion != nil && st.Fusion.Weights != nil && len(st.Fusion.Weights) != len(st.Prefetch):
		// the coordinator refuses it before any fan-out (CodeInvalid)
	case st.Fusion == nil && len(q.Vector) != sch.Dim && q.LikeID == "" && q.Recommend == nil:
		t.Fatalf("%s: a query without a vector of %d dimensions accepted: %v", st.Name, sch.Dim, q.Vector)
	}
	for i := range st.Prefetch {
		requireRunnable(t, sch, &st.Prefetch[i], depth+1)
	}
}
