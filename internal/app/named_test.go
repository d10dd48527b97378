package app_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
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

// namedDoc is a point of the named-vector model: its payload tree
// (numbers as json.Number, for refMatch), its named dense vectors (a name
// absent: the point lacks it) and its sparse vector "bm", if any.
type namedDoc struct {
	payload map[string]any
	dense   map[string][]float32
	bm      *sparsevec.Vector
}

// namedSpaces are the collection's named dense vectors: "text" 4-D
// cosine, "image" 3-D Euclid with int8.
var namedSpaces = map[string]struct {
	dim    int
	metric vector.Metric
}{"text": {4, vector.Cosine}, "image": {3, vector.Euclidean}}

func randDense(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	v[0] += 0.01 // never all zero under cosine
	return v
}

// randBM is a sparse vector of random weights (no ties between scores).
func randBM(rng *rand.Rand) sparsevec.Vector {
	v := sparsevec.Vector{}
	seen := map[uint32]bool{}
	for range 1 + rng.IntN(5) {
		t := uint32(rng.IntN(25))
		if !seen[t] {
			seen[t] = true
			v.Indices = append(v.Indices, t)
			v.Values = append(v.Values, 0.1+rng.Float32())
		}
	}
	return v
}

// nLeaf is a leaf of a test query: a nearest query by one vector.
type nLeaf struct {
	using  string // "text", "image" or "bm"
	dense  []float32
	sparse sparsevec.Vector
	filter map[string]any
	fsrc   string
	limit  int
}

func (l nLeaf) body() map[string]any {
	m := map[string]any{"using": l.using, "limit": l.limit}
	if l.using == "bm" {
		m["query"] = sparseJSON(l.sparse)
	} else {
		m["query"] = l.dense
	}
	if l.fsrc != "" {
		m["filter"] = json.RawMessage(l.fsrc)
	}
	return m
}

type nHit struct {
	id    string
	score float64
}

func sortNHits(hs []nHit) {
	slices.SortFunc(hs, func(a, b nHit) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
}

// bruteLeaf is the leaf's global top list over the model, Qdrant's
// semantics: the points matching every filter above and its own that
// hold the vector, best first (for Euclid the nearest; scores are then
// distances), cut at its limit.
func bruteLeaf(docs map[string]namedDoc, l nLeaf, above map[string]any) []nHit {
	keep := func(id string, d namedDoc) bool {
		return (above == nil || refMatch(above, id, d.payload)) && (l.filter == nil || refMatch(l.filter, id, d.payload))
	}
	var out []nHit
	if l.using == "bm" {
		sdocs := map[string]sparseDoc{}
		for id, d := range docs {
			sd := sparseDoc{payload: d.payload, sparse: map[string]sparsevec.Vector{}}
			if d.bm != nil {
				sd.sparse["bm"] = *d.bm
			}
			sdocs[id] = sd
		}
		for id, s := range sparseRef(sdocs, "bm", l.sparse, true, nil) {
			if keep(id, docs[id]) {
				out = append(out, nHit{id, float64(s)})
			}
		}
	} else {
		sp := namedSpaces[l.using]
		q := l.dense
		if sp.metric == vector.Cosine {
			q = unit64(q)
		}
		for id, d := range docs {
			x, ok := d.dense[l.using]
			if !ok || !keep(id, d) {
				continue
			}
			switch sp.metric {
			case vector.Cosine:
				out = append(out, nHit{id, dot(q, unit64(x))})
			case vector.Euclidean:
				var s float64
				for i := range q {
					s += (float64(q[i]) - float64(x[i])) * (float64(q[i]) - float64(x[i]))
				}
				out = append(out, nHit{id, -math.Sqrt(s)}) // negated to sort; flipped back below
			}
		}
	}
	sortNHits(out)
	out = out[:min(l.limit, len(out))]
	if l.using == "image" {
		for i := range out {
			out[i].score = -out[i].score
		}
	}
	return out
}

func unit64(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(n))
	}
	return out
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// bruteFusion fuses the leaves' global lists as Qdrant documents it: RRF
// (1/(position + k), positions from 0, k = 2 unless given, summed in
// float32 in list order) or DBSF (each list's scores — a distance list
// negated — mapped by mean ± 3 sample standard deviations, summed).
func bruteFusion(method string, lists [][]nHit, euclid []bool) []nHit {
	sum64 := map[string]float64{}
	sum32 := map[string]float32{}
	for li, l := range lists {
		switch method {
		case "rrf", "rrf60":
			k := float32(2)
			if method == "rrf60" {
				k = 60
			}
			for pos, h := range l {
				sum32[h.id] += 1 / (float32(pos) + k)
			}
		case "dbsf":
			scores := make([]float64, len(l))
			for i, h := range l {
				scores[i] = h.score
				if euclid[li] {
					scores[i] = -h.score
				}
			}
			if len(l) == 1 {
				sum64[l[0].id] += 0.5
				continue
			}
			var mean, ss float64
			for _, s := range scores {
				mean += s
			}
			mean /= float64(len(l))
			for _, s := range scores {
				ss += (s - mean) * (s - mean)
			}
			sd := math.Sqrt(ss / float64(len(l)-1))
			for i, h := range l {
				if sd == 0 {
					sum64[h.id] += 0.5
				} else {
					sum64[h.id] += (scores[i] - (mean - 3*sd)) / (6 * sd)
				}
			}
		}
	}
	var out []nHit
	for id, s := range sum32 {
		out = append(out, nHit{id, float64(s)})
	}
	for id, s := range sum64 {
		out = append(out, nHit{id, s})
	}
	sortNHits(out)
	return out
}

type namedAnswer struct {
	Result struct {
		Points []struct {
			ID     json.Number                `json:"id"`
			Score  float64                    `json:"score"`
			Vector map[string]json.RawMessage `json:"vector"`
		} `json:"points"`
	} `json:"result"`
	ScatterGather struct {
		Degraded bool `json:"degraded"`
	} `json:"scatter_gather"`
}

// TestNamedVectorQueriesAreExact is the brute-force property for named
// dense vectors over three shards of two replicas through the Qdrant
// API: a collection of two named dense vectors (4-D cosine; 3-D Euclid
// with int8) and one sparse vector (idf), random points (some lacking a
// vector, some holding none), overwrites, deletes, updates of one
// named vector and removals of one vector from a point; random queries by one vector and random prefetch trees
// fusing two or three of them (rrf, rrf with k, dbsf) under random
// filters at both levels, and legacy searches by a named vector. Every
// answer equals Qdrant's semantics evaluated over the whole collection,
// and stays so after every replica restarts from its snapshot and the
// log written since.
func TestNamedVectorQueriesAreExact(t *testing.T) {
	t.Parallel() // an exactness test: its own cluster, its own deadlines of seconds
	dir := t.TempDir()
	dcfg := devcluster.Config{Shards: 3, Replicas: 2, Dim: 4, Kernel: vector.Generic(), DataDir: dir}
	dc, err := devcluster.Start(dcfg)
	require.NoError(t, err)
	a, _, stop := routerOver(t, dc)

	code, raw := a.do(http.MethodPut, "/collections/nv", map[string]any{
		"vectors": map[string]any{
			"text":  map[string]any{"size": 4, "distance": "Cosine"},
			"image": map[string]any{"size": 3, "distance": "Euclid", "quantization_config": map[string]any{"scalar": map[string]any{"type": "int8"}}},
		},
		"sparse_vectors": map[string]any{"bm": map[string]any{"modifier": "idf"}},
	})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	code, raw = a.do(http.MethodGet, "/collections/nv", nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(raw), `"vectors":{"image":{"size":3,"distance":"Euclid","on_disk":false,"quantization_config":{"scalar":{"type":"int8"}}},"text":{"size":4,"distance":"Cosine","on_disk":false}}`)

	rng := rand.New(rand.NewPCG(41, 7))
	docs := map[string]namedDoc{}
	randFilter := func() (string, map[string]any) {
		src := filtertest.Filter(rng, 2)
		for strings.Contains(src, "doc-") { // Qdrant ids are integers or UUIDs
			src = filtertest.Filter(rng, 2)
		}
		return src, decodeNumbers(t, []byte(src))
	}
	upsert := func(n int) {
		var pts []map[string]any
		batch := map[string]bool{}
		for range n {
			id := strconv.Itoa(rng.IntN(100))
			if batch[id] {
				continue
			}
			batch[id] = true
			vec := map[string]any{}
			d := namedDoc{dense: map[string][]float32{}}
			for _, name := range []string{"text", "image"} {
				if rng.IntN(4) > 0 {
					v := randDense(rng, namedSpaces[name].dim)
					vec[name], d.dense[name] = v, v
				}
			}
			if rng.IntN(3) > 0 {
				v := randBM(rng)
				vec["bm"], d.bm = sparseJSON(v), &v
			}
			pl := filtertest.Payload(rng)
			d.payload = decodeNumbers(t, []byte(pl))
			pts = append(pts, map[string]any{"id": json.Number(id), "vector": vec, "payload": json.RawMessage(pl)})
			docs[id] = d
		}
		code, raw := a.do(http.MethodPut, "/collections/nv/points?wait=true", map[string]any{"points": pts})
		require.Equal(t, http.StatusOK, code, "%s", raw)
	}
	randLeaf := func() nLeaf {
		l := nLeaf{using: []string{"text", "image", "bm"}[rng.IntN(3)], limit: []int{3, 5, 10, 20}[rng.IntN(4)]}
		if l.using == "bm" {
			l.sparse = randBM(rng)
		} else {
			l.dense = randDense(rng, namedSpaces[l.using].dim)
		}
		if rng.IntN(3) == 0 {
			l.fsrc, l.filter = randFilter()
		}
		return l
	}
	requireHits := func(want []nHit, raw []byte, what string) {
		t.Helper()
		var ans namedAnswer
		require.NoError(t, json.Unmarshal(raw, &ans), "%s", raw)
		require.False(t, ans.ScatterGather.Degraded, what)
		got := ans.Result.Points
		require.Len(t, got, len(want), "%s: %s", what, raw)
		for i := range want {
			require.Equal(t, want[i].id, got[i].ID.String(), "%s: hit %d: %s", what, i, raw)
			require.InDelta(t, want[i].score, got[i].Score, 1e-4, "%s: score at %d", what, i)
		}
	}
	queries, answered := 0, 0
	query := func(what string) {
		t.Helper()
		queries++
		switch kind := rng.IntN(5); {
		case kind < 2: // one vector, maybe filtered
			l := randLeaf()
			code, raw := a.do(http.MethodPost, "/collections/nv/points/query?deadline_ms=3000", l.body())
			require.Equal(t, http.StatusOK, code, "%s", raw)
			want := bruteLeaf(docs, l, nil)
			requireHits(want, raw, fmt.Sprintf("%s: %v", what, l.body()))
			if len(want) > 0 {
				answered++
			}
		case kind < 4: // a fusion of two or three leaves
			method := []string{"rrf", "rrf60", "dbsf"}[rng.IntN(3)]
			var leaves []nLeaf
			for range 2 + rng.IntN(2) {
				leaves = append(leaves, randLeaf())
			}
			body := map[string]any{"limit": 1 + rng.IntN(12)}
			switch method {
			case "rrf60":
				body["query"] = map[string]any{"rrf": map[string]any{"k": 60}}
			default:
				body["query"] = map[string]any{"fusion": method}
			}
			var root map[string]any
			if rng.IntN(3) == 0 {
				var src string
				src, root = randFilter()
				body["filter"] = json.RawMessage(src)
			}
			var ps []any
			var lists [][]nHit
			var euclid []bool
			for _, l := range leaves {
				ps = append(ps, l.body())
				lists = append(lists, bruteLeaf(docs, l, root))
				euclid = append(euclid, l.using == "image")
			}
			body["prefetch"] = ps
			code, raw := a.do(http.MethodPost, "/collections/nv/points/query?deadline_ms=3000", body)
			require.Equal(t, http.StatusOK, code, "%s", raw)
			want := bruteFusion(method, lists, euclid)
			want = want[:min(body["limit"].(int), len(want))]
			requireHits(want, raw, fmt.Sprintf("%s: %s", what, mustMarshal(t, body)))
			if len(want) > 0 {
				answered++
			}
		default: // a legacy search by a named dense vector
			l := randLeaf()
			for l.using == "bm" {
				l = randLeaf()
			}
			body := map[string]any{"vector": map[string]any{"name": l.using, "vector": l.dense}, "limit": l.limit}
			if l.fsrc != "" {
				body["filter"] = json.RawMessage(l.fsrc)
			}
			code, raw := a.do(http.MethodPost, "/collections/nv/points/search?deadline_ms=3000", body)
			require.Equal(t, http.StatusOK, code, "%s", raw)
			var ans struct {
				Result json.RawMessage `json:"result"`
			}
			require.NoError(t, json.Unmarshal(raw, &ans))
			wrapped, err := json.Marshal(map[string]any{"result": map[string]any{"points": ans.Result}})
			require.NoError(t, err)
			want := bruteLeaf(docs, l, nil)
			requireHits(want, wrapped, fmt.Sprintf("%s: search %v", what, body))
		}
	}

	for step := range 70 {
		switch op := rng.IntN(10); {
		case op < 4:
			upsert(1 + rng.IntN(25))
		case op < 5:
			var ids []json.Number
			for range 3 {
				id := strconv.Itoa(rng.IntN(100))
				ids = append(ids, json.Number(id))
				delete(docs, id)
			}
			code, raw := a.do(http.MethodPost, "/collections/nv/points/delete?wait=true", map[string]any{"points": ids})
			require.Equal(t, http.StatusOK, code, "%s", raw)
		case op < 6: // update one named vector of a stored point
			for id, d := range docs {
				name := []string{"text", "image"}[rng.IntN(2)]
				v := randDense(rng, namedSpaces[name].dim)
				code, raw := a.do(http.MethodPut, "/collections/nv/points/vectors?wait=true", map[string]any{
					"points": []map[string]any{{"id": json.Number(id), "vector": map[string]any{name: v}}}})
				require.Equal(t, http.StatusOK, code, "%s", raw)
				d.dense[name] = v
				break
			}
		case op < 7: // remove one vector (named or sparse) from a stored point
			for id, d := range docs {
				name := []string{"text", "image", "bm"}[rng.IntN(3)]
				code, raw := a.do(http.MethodPost, "/collections/nv/points/vectors/delete?wait=true", map[string]any{
					"points": []json.Number{json.Number(id)}, "vector": []string{name}})
				require.Equal(t, http.StatusOK, code, "%s", raw)
				if name == "bm" {
					d.bm = nil
					docs[id] = d
				} else {
					delete(d.dense, name)
				}
				break
			}
		default:
			query(fmt.Sprintf("step %d", step))
		}
	}
	// A point reads back the vectors it holds, by name, and no others.
	for id, d := range docs {
		code, raw := a.do(http.MethodGet, "/collections/nv/points/"+id, nil)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var got struct {
			Result struct {
				Vector map[string]json.RawMessage `json:"vector"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(raw, &got), "%s", raw)
		n := len(d.dense)
		if d.bm != nil {
			n++
		}
		require.Len(t, got.Result.Vector, n, "%s", raw)
		for name, v := range d.dense {
			var x []float32
			require.NoError(t, json.Unmarshal(got.Result.Vector[name], &x))
			if namedSpaces[name].metric == vector.Cosine {
				require.InDeltaSlice(t, unit64(v), x, 1e-6)
			} else {
				require.Equal(t, v, x)
			}
		}
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
	for i := range 25 {
		query(fmt.Sprintf("after the restart, query %d", i))
	}
	require.Greater(t, answered, queries/2, "most queries have hits: the property is not vacuous")
}

func mustMarshal(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
