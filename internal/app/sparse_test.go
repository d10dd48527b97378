package app_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter/filtertest"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// sparseDoc is a point of the sparse model: its payload tree (numbers as
// json.Number, for refMatch) and sparse vectors by name.
type sparseDoc struct {
	payload map[string]any
	sparse  map[string]sparsevec.Vector
}

func randSparseVec(rng *rand.Rand) sparsevec.Vector {
	v := sparsevec.Vector{}
	seen := map[uint32]bool{}
	for range 1 + rng.IntN(6) {
		t := uint32(rng.IntN(40))
		if !seen[t] {
			seen[t] = true
			v.Indices = append(v.Indices, t)
			// Quarters, so scores tie now and then.
			v.Values = append(v.Values, float32(1+rng.IntN(8))/4)
		}
	}
	return v
}

func sparseJSON(v sparsevec.Vector) map[string]any {
	return map[string]any{"indices": v.Indices, "values": v.Values}
}

// sparseRef is Qdrant's documented sparse search over the model: the
// points the filter matches whose vector `name` shares a term with q,
// scored Σ q·idf·d over the shared terms (ascending term order, float32),
// idf (when asked) collection-wide: ln((N − df + 0.5)/(df + 0.5) + 1),
// N the points holding a vector of the name (Qdrant's indexed vectors),
// df those whose vector holds the term.
func sparseRef(docs map[string]sparseDoc, name string, q sparsevec.Vector, idf bool, f map[string]any) map[string]float32 {
	s := q.Sorted()
	w := make([]float32, s.Len())
	holding := 0
	for _, d := range docs {
		if _, ok := d.sparse[name]; ok {
			holding++
		}
	}
	for i, t := range s.Indices {
		w[i] = 1
		if idf {
			df := 0
			for _, d := range docs {
				if v, ok := d.sparse[name]; ok && slices.Contains(v.Indices, t) {
					df++
				}
			}
			w[i] = sparsevec.IDF(uint64(holding), uint64(df))
		}
	}
	out := map[string]float32{}
	for id, d := range docs {
		v, ok := d.sparse[name]
		if !ok || (f != nil && !refMatch(f, id, d.payload)) {
			continue
		}
		var sum float32
		shared := false
		for i, t := range s.Indices {
			if j := slices.Index(v.Indices, t); j >= 0 {
				sum += s.Values[i] * w[i] * v.Values[j]
				shared = true
			}
		}
		if shared {
			out[id] = sum
		}
	}
	return out
}

type sparseHit struct {
	ID     json.Number     `json:"id"`
	Score  float64         `json:"score"`
	Vector json.RawMessage `json:"vector"`
}

// requireSparseTopK checks an answer against the reference: as many hits
// as min(k, matches), each with its exact score, best first; ids are the
// reference's best, any of those tied at the last score.
func requireSparseTopK(t *testing.T, ref map[string]float32, k int, got []sparseHit, what string) {
	t.Helper()
	type hit struct {
		id    string
		score float32
	}
	var want []hit
	for id, s := range ref {
		want = append(want, hit{id, s})
	}
	slices.SortFunc(want, func(a, b hit) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	want = want[:min(k, len(want))]
	require.Len(t, got, len(want), what)
	for i, g := range got {
		s, ok := ref[g.ID.String()]
		require.True(t, ok, "%s: hit %s is not a match", what, g.ID)
		require.Equal(t, float32(g.Score), s, "%s: score of %s", what, g.ID)
		require.Equal(t, want[i].score, s, "%s: hit %d", what, i)
	}
}

// TestSparseQueriesAreExactOverTheCollection is the brute-force property
// for sparse vectors over three shards of two replicas through the
// Qdrant API: random points carrying two sparse vectors (one with idf),
// payloads, overwrites, deletes and sparse-only vector updates; random
// sparse queries with random filters. Every answer equals Qdrant's
// semantics evaluated over the whole collection (idf collection-wide, not
// per shard), and stays so after every replica restarts from its
// snapshot and the log written since.
func TestSparseQueriesAreExactOverTheCollection(t *testing.T) {
	t.Parallel() // an exactness test: its own cluster, its own deadlines of seconds
	dir := t.TempDir()
	dcfg := devcluster.Config{Shards: 3, Replicas: 2, Dim: 4, Kernel: vector.Generic(), DataDir: dir}
	dc, err := devcluster.Start(dcfg)
	require.NoError(t, err)
	a, _, stop := routerOver(t, dc)

	code, raw := a.do(http.MethodPut, "/collections/hy", map[string]any{
		"vectors":        map[string]any{"size": 4, "distance": "Dot"},
		"sparse_vectors": map[string]any{"bm": map[string]any{"modifier": "idf"}, "splade": map[string]any{}},
	})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	code, raw = a.do(http.MethodGet, "/collections/hy", nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(raw), `"sparse_vectors":{"bm":{"modifier":"idf"},"splade":{}}`)

	rng := rand.New(rand.NewPCG(37, 1))
	docs := map[string]sparseDoc{}
	names := []string{"bm", "splade"}
	queries, answered := 0, 0 // queries, and those with hits
	upsert := func(n int) {
		var pts []map[string]any
		batch := map[string]bool{}
		for range n {
			id := strconv.Itoa(rng.IntN(120))
			if batch[id] {
				continue
			}
			batch[id] = true
			vec := map[string]any{"": []float32{1, 0, 0, 0}}
			d := sparseDoc{sparse: map[string]sparsevec.Vector{}}
			for _, name := range names {
				if rng.IntN(5) > 0 {
					v := randSparseVec(rng)
					vec[name], d.sparse[name] = sparseJSON(v), v
				}
			}
			pl := filtertest.Payload(rng)
			d.payload = decodeNumbers(t, []byte(pl))
			pts = append(pts, map[string]any{"id": json.Number(id), "vector": vec, "payload": json.RawMessage(pl)})
			docs[id] = d
		}
		code, raw := a.do(http.MethodPut, "/collections/hy/points?wait=true", map[string]any{"points": pts})
		require.Equal(t, http.StatusOK, code, "%s", raw)
	}
	query := func(what string) {
		t.Helper()
		name := names[rng.IntN(2)]
		q := randSparseVec(rng)
		k := 1 + rng.IntN(15)
		body := map[string]any{"query": sparseJSON(q), "using": name, "limit": k}
		var ftree map[string]any
		if rng.IntN(2) == 0 {
			src := filtertest.Filter(rng, 2)
			for strings.Contains(src, "doc-") { // Qdrant ids are integers or UUIDs
				src = filtertest.Filter(rng, 2)
			}
			ftree = decodeNumbers(t, []byte(src))
			body["filter"] = json.RawMessage(src)
		}
		code, raw := a.do(http.MethodPost, "/collections/hy/points/query?deadline_ms=3000", body)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var ans struct {
			Result struct {
				Points []sparseHit `json:"points"`
			} `json:"result"`
			ScatterGather struct {
				Degraded bool `json:"degraded"`
			} `json:"scatter_gather"`
		}
		require.NoError(t, json.Unmarshal(raw, &ans), "%s", raw)
		require.False(t, ans.ScatterGather.Degraded)
		ref := sparseRef(docs, name, q, name == "bm", ftree)
		requireSparseTopK(t, ref, k, ans.Result.Points, fmt.Sprintf("%s: %s %v filter %v", what, name, q, body["filter"]))
		queries++
		if len(ans.Result.Points) > 0 {
			answered++
		}
	}

	for step := range 60 {
		switch op := rng.IntN(10); {
		case op < 4:
			upsert(1 + rng.IntN(20))
		case op < 5:
			var ids []json.Number
			for range 3 {
				id := strconv.Itoa(rng.IntN(120))
				ids = append(ids, json.Number(id))
				delete(docs, id)
			}
			code, raw := a.do(http.MethodPost, "/collections/hy/points/delete?wait=true", map[string]any{"points": ids})
			require.Equal(t, http.StatusOK, code, "%s", raw)
		case op < 6: // update one sparse vector of a stored point
			for id, d := range docs {
				v := randSparseVec(rng)
				code, raw := a.do(http.MethodPut, "/collections/hy/points/vectors?wait=true", map[string]any{
					"points": []map[string]any{{"id": json.Number(id), "vector": map[string]any{"splade": sparseJSON(v)}}}})
				require.Equal(t, http.StatusOK, code, "%s", raw)
				d.sparse["splade"] = v
				break
			}
		default:
			query(fmt.Sprintf("step %d", step))
		}
	}
	// with_vector returns the map of vectors, sparse ones in Qdrant's shape
	// (a point holding only its dense vector gets it plain, as in Qdrant).
	for id, d := range docs {
		if len(d.sparse) == 0 {
			continue
		}
		code, raw := a.do(http.MethodGet, "/collections/hy/points/"+id, nil)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var got struct {
			Result struct {
				Vector map[string]json.RawMessage `json:"vector"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(raw, &got))
		require.Len(t, got.Result.Vector, 1+len(d.sparse), "%s", raw)
		for name, v := range d.sparse {
			var sv struct {
				Indices []uint32  `json:"indices"`
				Values  []float32 `json:"values"`
			}
			require.NoError(t, json.Unmarshal(got.Result.Vector[name], &sv))
			require.ElementsMatch(t, v.Indices, sv.Indices)
		}
		break
	}

	// Every replica takes a snapshot, more is written (replayed from the
	// log at the restart), and every replica restarts.
	for _, sh := range []string{"shard-0", "shard-1", "shard-2"} {
		for i := range 2 {
			r, ok := dc.Replica(sh, i)
			require.True(t, ok)
			require.NoError(t, r.Node.Snapshot())
		}
	}
	upsert(20)
	for i := range 10 {
		query(fmt.Sprintf("before the restart, query %d", i))
	}
	stop()
	dc.Close()
	dc, err = devcluster.Start(dcfg)
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	a, _, _ = routerOver(t, dc)
	for i := range 20 {
		query(fmt.Sprintf("after the restart, query %d", i))
	}
	require.Greater(t, answered, queries/2, "most queries have hits: the property is not vacuous")
}
