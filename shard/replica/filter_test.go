package replica

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/filtertest"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// matching returns the rows of mem whose payloads match f, as a Rows of
// their own, and their ids' payloads (a document without one has none).
func matching(t *testing.T, mem *store.Memory, f *filter.Filter) (vector.Rows, map[string][]byte) {
	t.Helper()
	var all vector.Rows
	require.NoError(t, mem.View(func(r vector.Rows) error {
		all = r.Clone()
		return nil
	}))
	var (
		subData []float32
		subIDs  []string
	)
	payloads := map[string][]byte{}
	for i, id := range all.IDs {
		r, ok := mem.Record(id)
		require.True(t, ok)
		payloads[id] = r.Payload
		// A payload that does not decode counts as none, as in the store.
		doc, err := filter.DecodePayload(r.Payload)
		if err != nil {
			doc = nil
		}
		if f.Match(doc) {
			subData = append(subData, all.Row(i)...)
			subIDs = append(subIDs, id)
		}
	}
	return vector.FlatRows(subData, mem.Dim(), subIDs), payloads
}

// TestFilteredSearchIsTheTopKOfTheMatchingRows: through upserts,
// overwrites and deletes, a filtered exact search equals a scan of only
// the matching rows, an int8 one returns matching rows only with exact
// scores, score_threshold cuts the list where it should, with_payload
// returns the stored payload or its keys, and the payload index rebuilt
// from a snapshot selects the same rows.
func TestFilteredSearchIsTheTopKOfTheMatchingRows(t *testing.T) {
	longtest.Mark(t) // 240 commits a metric, each synced; internal/app's and the store's filter tests are in make test
	const dim = 8
	for _, m := range []vector.Metric{vector.Cosine, vector.DotProduct, vector.Euclidean} {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel() // each waits on its own log's fsyncs for much of its time
			rng := rand.New(rand.NewPCG(uint64(m)+1, 5))
			cfg := Config{Legacy: catalog.Settings{Dim: dim, Metric: m, Quantization: catalog.QuantInt8}, Kernel: vector.Generic(),
				Int8MinRows: neverTrain}
			rep, c := serve(t, cfg, nil, client.DialConfig{})
			mem := rep.Store
			vec := func() []float32 {
				v := make([]float32, dim)
				for j := range v {
					v[j] = float32(rng.IntN(9) - 4)
				}
				v[rng.IntN(dim)] = 5
				return v
			}
			var ids []string
			for b := range 12 {
				var vs []*shardpb.Vector
				for i := range 200 {
					id := fmt.Sprintf("doc-%d-%d", b, i)
					if len(ids) > 0 && rng.IntN(5) == 0 {
						id = ids[rng.IntN(len(ids))] // an overwrite
					} else {
						ids = append(ids, id)
					}
					if slices.ContainsFunc(vs, func(v *shardpb.Vector) bool { return v.GetId() == id }) {
						continue
					}
					pv := &shardpb.Vector{Id: id, Vector: shard.EncodeVector(vec())}
					if rng.IntN(8) > 0 {
						pv.Payload = []byte(filtertest.Payload(rng))
					}
					vs = append(vs, pv)
				}
				_, err := c.Upsert(ctx(t), place, vs)
				require.NoError(t, err)
				for range 20 {
					_, _, err := c.Delete(ctx(t), place, ids[rng.IntN(len(ids))])
					require.NoError(t, err)
				}
			}
			commitTrained(t, rep, store.TrainedInt8Scale, trainScale(t, mem))
			require.True(t, mem.Int8Ready())

			for fi := range 40 {
				src := filtertest.Filter(rng, 3)
				if fi == 0 {
					src = `{"must": {"key": "nope", "match": {"value": 1}}}` // matches nothing
				}
				f, err := filter.Parse([]byte(src))
				require.NoError(t, err)
				canon, _ := json.Marshal(f)
				sub, payloads := matching(t, mem, f)
				qv := vec()
				k := 1 + rng.IntN(20)
				want, err := vector.Generic().Scan(ctx(t), m, sub, []vector.Query{{Vector: normalised(m, qv), K: k}})
				require.NoError(t, err)
				q := client.Query{Vector: qv, K: k, Filter: canon}
				exact := q
				exact.Exact = true
				exact.Payload = &client.PayloadSelection{All: true}
				keys := q
				keys.Exact = true
				keys.Payload = &client.PayloadSelection{Keys: []string{"lang", "meta", "absent"}}
				int8q := q
				int8q.Oversample = 32
				resp, err := c.Search(ctx(t), []client.Query{exact, keys}, 0)
				require.NoError(t, err, src)
				require.True(t, resp.Exact)
				// A batch with an exact query scans exactly: int8 apart.
				resp8, err := c.Search(ctx(t), []client.Query{int8q, q}, 0)
				require.NoError(t, err, src)
				require.Equal(t, hitsOfVector(want[0]), hitPairs(resp.Hits[0]), "filter %s", src)
				require.Equal(t, hitsOfVector(want[0]), hitPairs(resp.Hits[1]), "filter %s", src)
				for i, h := range resp.Hits[0] {
					stored := payloads[h.ID]
					if len(stored) == 0 {
						stored = []byte("{}")
					}
					require.Equal(t, string(stored), string(h.Payload))
					var all, some map[string]json.RawMessage
					require.NoError(t, json.Unmarshal(stored, &all))
					require.NoError(t, json.Unmarshal(resp.Hits[1][i].Payload, &some))
					for k, v := range all {
						if k != "lang" && k != "meta" {
							delete(all, k)
							continue
						}
						require.JSONEq(t, string(v), string(some[k]))
					}
					require.Len(t, some, len(all))
				}
				exactScore := map[string]float32{}
				for _, h := range want[0] {
					exactScore[h.ID] = h.Score
				}
				inSub := map[string]bool{}
				for _, id := range sub.IDs {
					inSub[id] = true
				}
				for _, hs := range resp8.Hits {
					require.LessOrEqual(t, len(hs), len(want[0]))
					for _, h := range hs {
						require.True(t, inSub[h.ID], "int8 hit %s outside the filter %s", h.ID, src)
						require.Nil(t, h.Payload, "not asked for")
					}
				}
				require.False(t, resp8.Exact, "int8 scan")
				// The client fills in "{}" for an absent payload and drops one
				// not asked for: the replica itself sends "{}" when asked and
				// nothing when not.
				raw, err := rep.Server.Search(ctx(t), &shardpb.SearchRequest{Queries: []*shardpb.Query{
					{Vector: shard.EncodeVector(qv), K: uint32(k), Filter: canon, Exact: true,
						WithPayload: &shardpb.PayloadSelector{All: true}},
					{Vector: shard.EncodeVector(qv), K: uint32(k), Filter: canon, Exact: true},
				}})
				require.NoError(t, err, src)
				require.Len(t, raw.GetResults(), 2)
				require.Len(t, raw.GetResults()[0].GetHits(), len(want[0]))
				for _, h := range raw.GetResults()[0].GetHits() {
					stored := payloads[h.GetId()]
					if len(stored) == 0 {
						stored = []byte("{}")
					}
					require.Equal(t, string(stored), string(h.GetPayload()), "the replica's payload of %s", h.GetId())
				}
				for _, h := range raw.GetResults()[1].GetHits() {
					require.Empty(t, h.GetPayload(), "not asked for: the replica sends none")
				}

				if len(want[0]) > 2 {
					// The threshold as a client would send it: a score it read.
					th, _ := strconv.ParseFloat(strconv.FormatFloat(float64(want[0][2].Score), 'g', -1, 32), 64)
					tq := exact
					tq.ScoreThreshold = &th
					tq.Payload = nil
					r, err := c.Search(ctx(t), []client.Query{tq}, 0)
					require.NoError(t, err)
					var wantT []string
					for _, h := range want[0] {
						sc, _ := strconv.ParseFloat(strconv.FormatFloat(float64(h.Score), 'g', -1, 32), 64)
						if (m == vector.Euclidean && sc <= th) || (m != vector.Euclidean && sc >= th) {
							wantT = append(wantT, fmt.Sprintf("%s %v", h.ID, h.Score))
						}
					}
					require.Equal(t, wantT, hitPairs(r.Hits[0]))
					require.GreaterOrEqual(t, len(wantT), 3)
				}
			}

			// The index rebuilt from a snapshot selects the same rows: the
			// replica's state machine writes one, a fresh one restores it.
			snap, err := server.NewStateMachine(rep.Collections, nil, nil).Snapshot(rep.Node.AppliedIndex())
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, snap.Persist(raftnode.Writer(&buf)))
			snap.Release()
			cols := server.NewCollections(server.CollectionsConfig{Legacy: cfg.Legacy, Kernel: vector.Generic()})
			_, err = server.NewStateMachine(cols, nil, nil).Restore(&buf, nil)
			require.NoError(t, err)
			restored, ok := cols.Store(shard.LegacyCollection)
			require.True(t, ok, "the snapshot holds the legacy collection")
			for range 40 {
				f, err := filter.Parse([]byte(filtertest.Filter(rng, 3)))
				require.NoError(t, err)
				a, _ := matching(t, mem, f)
				b, _ := matching(t, restored, f)
				require.ElementsMatch(t, a.IDs, b.IDs)
				var sel []string
				require.NoError(t, restored.ViewScan(func(v *store.ScanView) error {
					rows, err := v.Select(f)
					for _, r := range rows {
						sel = append(sel, v.Rows.IDs[r])
					}
					return err
				}))
				require.ElementsMatch(t, a.IDs, sel)
			}
		})
	}
}

func normalised(m vector.Metric, v []float32) []float32 {
	v = slices.Clone(v)
	if m == vector.Cosine {
		vector.Generic().Normalize(v)
	}
	return v
}

func hitsOfVector(hs []vector.Hit) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, fmt.Sprintf("%s %v", h.ID, h.Score))
	}
	return out
}

func TestServerRefusesBadFiltersAndPayloads(t *testing.T) {
	_, c := serve(t, memConfig(4, vector.DotProduct), nil, client.DialConfig{})
	v := shard.EncodeVector([]float32{1, 2, 3, 4})
	_, err := c.Upsert(ctx(t), place, []*shardpb.Vector{{Id: "a", Vector: v, Payload: []byte(`{"a": [[1]]}`)}})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Contains(t, err.Error(), "vector 0: payload.a[0]: is an array inside an array")
	_, err = c.Upsert(ctx(t), place, []*shardpb.Vector{{Id: "a", Vector: v, Payload: []byte(` {"a" : 1} `)}})
	require.NoError(t, err)
	pv, err := c.Get(ctx(t), "a", 0)
	require.NoError(t, err)
	require.Equal(t, `{"a":1}`, string(pv.GetPayload()), "stored compacted")
	_, err = c.Search(ctx(t), []client.Query{{Vector: []float32{1, 2, 3, 4}, K: 1, Filter: []byte(`{"must": {"key": "a", "range": {}}}`)}}, 0)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Contains(t, err.Error(), "query 0: filter.must.range: needs at least one of gt, gte, lt, lte")
}

// TestFilteredSearchesAndWritesConcurrently: filtered searches (which
// read the payload index under the store's read lock) run beside writes
// (which change it under the write lock); the race detector checks that
// no read writes.
func TestFilteredSearchesAndWritesConcurrently(t *testing.T) {
	const dim = 4
	_, c := serve(t, memConfig(dim, vector.DotProduct), nil, client.DialConfig{})
	rng := rand.New(rand.NewPCG(9, 9))
	var filters [][]byte
	for range 8 {
		f, err := filter.Parse([]byte(filtertest.Filter(rng, 2)))
		require.NoError(t, err)
		b, _ := json.Marshal(f)
		filters = append(filters, b)
	}
	done := make(chan error, 3)
	for g := range 3 {
		go func() {
			for i := range 100 {
				q := client.Query{Vector: []float32{1, 2, 3, 4}, K: 5, Filter: filters[(g+i)%len(filters)],
					Payload: &client.PayloadSelection{All: true}}
				if _, err := c.Search(ctx(t), []client.Query{q}, 0); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	wrng := rand.New(rand.NewPCG(10, 10))
	for i := range 100 {
		id := fmt.Sprintf("d%d", wrng.IntN(50))
		if i%5 == 4 {
			_, _, err := c.Delete(ctx(t), place, id)
			require.NoError(t, err)
			continue
		}
		_, err := c.Upsert(ctx(t), place, []*shardpb.Vector{{Id: id, Vector: shard.EncodeVector([]float32{1, float32(i), 1, 1}),
			Payload: []byte(filtertest.Payload(wrng))}})
		require.NoError(t, err)
	}
	for range 3 {
		require.NoError(t, <-done)
	}
}
