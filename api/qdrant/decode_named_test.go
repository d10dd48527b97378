package qdrant

import (
	"errors"
	"net/http"
	"testing"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/vector"
)

// FuzzDecodeNamed: on a collection of named vectors (and a sparse one),
// creates, upserts, searches and queries either are refused with a 400
// or decode to what a shard runs as it is: every named vector of a
// point, and every dense query's vector, of the size of the vector it
// names, a dense query always naming one; a create's settings valid.
func FuzzDecodeNamed(f *testing.F) {
	for _, s := range []string{
		`{"vectors": {"text": {"size": 2, "distance": "Cosine"}, "image": {"size": 3, "distance": "Euclid", "quantization_config": {"scalar": {"type": "int8"}}}}}`,
		`{"vectors": {"text": {"size": 2, "distance": "Cosine", "on_disk": true}}}`, `{"vectors": {}}`, `{"vectors": {"": {"size": 2, "distance": "Dot"}}}`,
		`{"points": [{"id": 1, "vector": {"text": [1, 0], "image": [0, 0, 1], "bm": {"indices": [1], "values": [2]}}}, {"id": 2, "vector": {}}]}`,
		`{"points": [{"id": 1, "vector": [1, 0]}]}`, `{"points": [{"id": 1, "vector": {"text": [1, 0, 0]}}]}`, `{"points": [{"id": 1, "vector": {"text": [0, 0]}}]}`,
		`{"query": [1, 0], "using": "text"}`, `{"query": [1, 0]}`, `{"query": [1, 0, 0], "using": "text"}`, `{"query": {"nearest": [1, 0, 0]}, "using": "image"}`,
		`{"query": 7, "using": "text"}`, `{"query": {"indices": [1], "values": [1]}, "using": "bm"}`,
		`{"prefetch": [{"query": [1, 0], "using": "text"}, {"query": [1, 1, 1], "using": "image"}, {"query": {"indices": [3], "values": [1]}, "using": "bm"}], "query": {"fusion": "dbsf"}}`,
		`{"vector": {"name": "text", "vector": [1, 0]}, "limit": 3}`, `{"vector": {"name": "image", "vector": [1, 0]}}`, `{"vector": [1, 0]}`,
	} {
		f.Add([]byte(s))
	}
	sch := coordinator.Schema{Metric: vector.Cosine,
		Named:  map[string]catalog.Dense{"text": {Dim: 2, Metric: vector.Cosine}, "image": {Dim: 3, Metric: vector.Euclidean}},
		Sparse: map[string]catalog.Sparse{"bm": {}}}
	requireFits := func(t *testing.T, q coordinator.Query) {
		t.Helper()
		if q.Sparse != nil || q.LikeID != "" || q.Recommend != nil || len(q.Vector) == 0 {
			return
		}
		d, ok := sch.Named[q.Using]
		if !ok || len(q.Vector) != d.Dim {
			t.Fatalf("a query by %q of %d dimensions accepted", q.Using, len(q.Vector))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		is400 := func(err error) {
			t.Helper()
			var we *wire.Error
			if !errors.As(err, &we) || we.Status != http.StatusBadRequest {
				t.Fatalf("error %v (%T), want a 400", err, err)
			}
		}
		if s, err := decodeCreate(b); err != nil {
			is400(err)
		} else if err := s.Normalize().Validate(); err != nil && len(s.Named) > 0 {
			// Validate runs after decodeCreate on the route (a name
			// shared with a sparse vector); it must name a vector.
			is400(wire.Invalid(err.Error()))
		}
		if recs, err := decodeUpsert(b, sch); err != nil {
			is400(err)
		} else {
			for _, r := range recs {
				if len(r.Vector) != 0 {
					t.Fatalf("an unnamed vector accepted on a collection of named vectors")
				}
				for name, v := range r.Named {
					if d, ok := sch.Named[name]; !ok || len(v) != d.Dim {
						t.Fatalf("named vector %q of %d dimensions accepted", name, len(v))
					}
				}
			}
		}
		if q, err := decodeSearch(b, sch); err != nil {
			is400(err)
		} else {
			requireFits(t, q.q)
		}
		if q, err := decodeQuery(b, sch); err != nil {
			is400(err)
		} else if q.tree == nil {
			requireFits(t, q.q)
		}
	})
}
