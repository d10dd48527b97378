package qdrant_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// TestQdrantHybridPrefetch: a dense and a sparse prefetch fused by RRF
// or DBSF (LangChain's hybrid retrieval) equal a brute force of the two
// global lists, on a Dot and a Euclid collection: under Euclid the dense
// list holds distances (DBSF reads their negation), the sparse list dot
// products (read as they are).
func TestQdrantHybridPrefetch(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	rng := rand.New(rand.NewPCG(8, 8))
	type sp struct {
		idx  []uint32
		vals []float32
	}
	randSparse := func() sp {
		set := map[uint32]bool{}
		for range 1 + rng.IntN(5) {
			set[uint32(rng.IntN(30))] = true
		}
		var s sp
		for t := range set {
			s.idx = append(s.idx, t)
		}
		slices.Sort(s.idx)
		for range s.idx {
			s.vals = append(s.vals, float32(rng.Float64()+0.1))
		}
		return s
	}
	const n = 200
	dense := make([][]float32, n)
	sparse := make([]sp, n)
	var pts []map[string]any
	for i := range n {
		dense[i], sparse[i] = randomVector(rng, 8), randSparse()
		pts = append(pts, map[string]any{"id": i + 1, "vector": map[string]any{"": dense[i], "s": map[string]any{"indices": sparse[i].idx, "values": sparse[i].vals}}})
	}
	for _, coll := range []struct {
		name, distance string
		l2             bool
	}{{"hyd", "Dot", false}, {"hye", "Euclid", true}} {
		t.Run(coll.distance, func(t *testing.T) {
			res := e.Do(http.MethodPut, "/collections/"+coll.name, `{"vectors": {"size": 8, "distance": "`+coll.distance+`"}, "sparse_vectors": {"s": {}}}`, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			res = e.Do(http.MethodPut, "/collections/"+coll.name+"/points?wait=true", string(mustJSON(t, map[string]any{"points": pts})), nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			for i := range 30 {
				qd, qs := randomVector(rng, 8), randSparse()
				ld, ls := 3+rng.IntN(20), 3+rng.IntN(20)
				var dl, sl []bHit
				for j := range n {
					s := dot64(qd, dense[j])
					if coll.l2 {
						s = dist64(qd, dense[j])
					}
					dl = append(dl, bHit{j + 1, s})
					var ss float64
					shared := false
					for a, t := range qs.idx {
						if b, ok := slices.BinarySearch(sparse[j].idx, t); ok {
							ss += float64(qs.vals[a]) * float64(sparse[j].vals[b])
							shared = true
						}
					}
					if shared {
						sl = append(sl, bHit{j + 1, ss})
					}
				}
				sortHits(dl, coll.l2)
				sortHits(sl, false)
				dl, sl = dl[:min(ld, len(dl))], sl[:min(ls, len(sl))]
				method := []string{"rrf", "dbsf"}[i%2]
				fd := dl
				if coll.l2 {
					fd = slices.Clone(dl)
					for k := range fd {
						fd[k].score = -fd[k].score
					}
				}
				want := bruteFuse(method, [][]bHit{fd, sl})
				want = want[:min(10, len(want))]
				body := map[string]any{
					"prefetch": []any{
						map[string]any{"query": qd, "limit": ld},
						map[string]any{"query": map[string]any{"indices": qs.idx, "values": qs.vals}, "using": "s", "limit": ls},
					},
					"query": map[string]any{"fusion": method}, "limit": 10,
				}
				raw := mustJSON(t, body)
				res := e.Do(http.MethodPost, "/collections/"+coll.name+"/points/query", string(raw), nil)
				require.Equal(t, http.StatusOK, res.Status, "%s: %s", raw, res.Body)
				requireFused(t, want, queryHits(t, res.Body), fmt.Sprintf("query %d (%s): %s", i, method, raw))
			}
		})
	}
}
