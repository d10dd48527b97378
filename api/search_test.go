package api_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/vector"
)

// objectKeys lists a JSON object's member names in document order.
func objectKeys(t testing.TB, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok, "not an object: %s", raw)
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		out = append(out, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return out
}

func members(t testing.TB, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	return m
}

var sgKeys = []string{"degraded", "shards_total", "shards_queried", "unavailable_shards", "shard_errors",
	"coverage", "exact", "elapsed_ms", "deadline_ms", "shard_deadline_ms"}

type itemJSON struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
	Shard string  `json:"shard"`
}

type sgJSON struct {
	Degraded          bool              `json:"degraded"`
	ShardsTotal       int               `json:"shards_total"`
	ShardsQueried     int               `json:"shards_queried"`
	UnavailableShards []string          `json:"unavailable_shards"`
	ShardErrors       map[string]string `json:"shard_errors"`
	Coverage          float64           `json:"coverage"`
	Exact             bool              `json:"exact"`
	ElapsedMS         int64             `json:"elapsed_ms"`
	DeadlineMS        int64             `json:"deadline_ms"`
	ShardDeadlineMS   int64             `json:"shard_deadline_ms"`
	Shards            []map[string]any  `json:"shards"`
}

type searchAnswer struct {
	Items         []itemJSON `json:"items"`
	ScatterGather sgJSON     `json:"scatter_gather"`
}

// strictDecode decodes b into v refusing unknown fields, so the answer
// carries nothing the test does not know about.
func strictDecode(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "%s", b)
}

// homeOf is the shard whose replicas store id: every replica of exactly
// one shard, once the followers have applied what the leader acknowledged
// (a moment after the acknowledgement).
func (e *env) homeOf(id string) string {
	e.t.Helper()
	home := ""
	for i, reps := range e.dc.Replicas {
		count := func() int {
			n := 0
			for _, r := range reps {
				if _, ok := r.Store.Get(id); ok {
					n++
				}
			}
			return n
		}
		require.Eventually(e.t, func() bool { n := count(); return n == 0 || n == len(reps) }, 5*time.Second, 5*time.Millisecond,
			"%q on %d of %d replicas of %s", id, count(), len(reps), e.dc.Names[i])
		if count() == 0 {
			continue
		}
		require.Empty(e.t, home, "%q stored on two shards", id)
		home = e.dc.Names[i]
	}
	return home
}

// reference is the exact cosine top-k over the corpus, in float64.
func (e *env) reference(q []float32, k int, exclude string) []itemJSON {
	var qn float64
	for _, x := range q {
		qn += float64(x) * float64(x)
	}
	qn = math.Sqrt(qn)
	var all []itemJSON
	for _, rec := range e.dc.Corpus {
		if rec.ID == exclude {
			continue
		}
		var s float64
		for i := range q {
			s += float64(q[i]) * float64(rec.Vector[i])
		}
		all = append(all, itemJSON{ID: rec.ID, Score: s / qn})
	}
	slices.SortFunc(all, func(a, b itemJSON) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return all[:k]
}

func TestSearchAnswerShape(t *testing.T) {
	e := newEnv(t, envConfig{})
	q := []float32{0.3, -1, 2, 0.5, 0, 1, -0.25, 4}
	res := e.post("/v1/search", map[string]any{"vector": q, "k": 7})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Equal(t, "false", res.header.Get("X-Trawl-Degraded"))
	require.Equal(t, "application/json", res.header.Get("Content-Type"))

	require.Equal(t, []string{"items", "scatter_gather"}, objectKeys(t, res.body))
	m := members(t, res.body)
	require.Equal(t, sgKeys, objectKeys(t, m["scatter_gather"]))
	var items []json.RawMessage
	require.NoError(t, json.Unmarshal(m["items"], &items))
	require.Len(t, items, 7)
	for _, it := range items {
		require.Equal(t, []string{"id", "score", "shard"}, objectKeys(t, it))
	}
	require.Contains(t, string(m["scatter_gather"]), `"unavailable_shards":[],"shard_errors":{},"coverage":1,"exact":true,`)

	var a searchAnswer
	strictDecode(t, res.body, &a)
	sg := a.ScatterGather
	require.False(t, sg.Degraded)
	require.Equal(t, 3, sg.ShardsTotal)
	require.Equal(t, 3, sg.ShardsQueried)
	require.Empty(t, sg.UnavailableShards)
	require.Empty(t, sg.ShardErrors)
	require.Equal(t, 1.0, sg.Coverage)
	require.EqualValues(t, testDeadline.Milliseconds(), sg.DeadlineMS, "the router's configured default")
	require.EqualValues(t, testDeadline.Milliseconds()-5, sg.ShardDeadlineMS)
	require.GreaterOrEqual(t, sg.ElapsedMS, int64(0))
	require.Nil(t, sg.Shards)

	// The merged answer is the exact top-k of the corpus, best first, and
	// each item names its home shard.
	ref := e.reference(q, 7, "")
	for i, it := range a.Items {
		require.Equal(t, ref[i].ID, it.ID, "rank %d", i)
		require.InDelta(t, ref[i].Score, it.Score, 1e-5, "rank %d", i)
		require.Equal(t, e.homeOf(it.ID), it.Shard)
	}

	// deadline_ms wins, and shard_detail adds "shards" last.
	res = e.post("/v1/search?deadline_ms=300&shard_detail=true", map[string]any{"vector_b64": b64(q)})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	m = members(t, res.body)
	require.Equal(t, append(slices.Clone(sgKeys), "shards"), objectKeys(t, m["scatter_gather"]))
	a = searchAnswer{}
	strictDecode(t, res.body, &a)
	require.Len(t, a.Items, 10, "k defaults to 10")
	require.EqualValues(t, 300, a.ScatterGather.DeadlineMS)
	require.EqualValues(t, 295, a.ScatterGather.ShardDeadlineMS)
	var shards []json.RawMessage
	require.NoError(t, json.Unmarshal(members(t, m["scatter_gather"])["shards"], &shards))
	require.Len(t, shards, 3)
	specs := e.dc.Specs()
	for i, sh := range shards {
		require.Equal(t, []string{"shard", "status", "replica", "latency_ms", "hedged", "failed_over"}, objectKeys(t, sh))
		d := a.ScatterGather.Shards[i]
		require.Equal(t, e.dc.Names[i], d["shard"])
		require.Equal(t, "ok", d["status"])
		require.Contains(t, specs[i].Addrs, d["replica"])
	}

	// The deadline is clamped at the maximum, not refused.
	res = e.post("/v1/search?deadline_ms=99999999999999999999999", map[string]any{"vector": q})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	a = searchAnswer{}
	strictDecode(t, res.body, &a)
	require.EqualValues(t, 10000, a.ScatterGather.DeadlineMS)
}

func TestSearchBatchAnswer(t *testing.T) {
	e := newEnv(t, envConfig{})
	qs := []map[string]any{
		{"vector": []float32{1, 0, 0, 0, 0, 0, 0, 0}, "k": 3},
		{"vector_b64": b64([]float32{0, 0, 0, 0, 0, 0, 0, 1})},
		{"like_id": "doc-5", "k": 4},
		{"vector": []float32{-1, 2, -3, 4, -5, 6, -7, 8}, "k": 1},
	}
	res := e.post("/v1/search/batch?shard_detail=true", map[string]any{"queries": qs})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Equal(t, "false", res.header.Get("X-Trawl-Degraded"))
	require.Equal(t, []string{"results", "scatter_gather"}, objectKeys(t, res.body))
	m := members(t, res.body)
	require.Equal(t, append(slices.Clone(sgKeys), "shards"), objectKeys(t, m["scatter_gather"]))
	var a struct {
		Results []struct {
			Items []itemJSON `json:"items"`
		} `json:"results"`
		ScatterGather sgJSON `json:"scatter_gather"`
	}
	strictDecode(t, res.body, &a)
	require.Len(t, a.Results, len(qs))
	require.False(t, a.ScatterGather.Degraded)
	require.Equal(t, 3, a.ScatterGather.ShardsQueried)

	// Results come in query order: each equals the same query sent alone.
	for i, q := range qs {
		one := e.post("/v1/search", q)
		require.Equal(t, http.StatusOK, one.status, "%s", one.body)
		var sa searchAnswer
		strictDecode(t, one.body, &sa)
		require.Equal(t, sa.Items, a.Results[i].Items, "query %d", i)
	}
	require.Len(t, a.Results[0].Items, 3)
	require.Len(t, a.Results[1].Items, 10)
	require.Len(t, a.Results[2].Items, 4)
	require.Len(t, a.Results[3].Items, 1)
	for _, it := range a.Results[2].Items {
		require.NotEqual(t, "doc-5", it.ID, "like_id's own document is left out")
	}
}

func TestLikeIDExcludesItself(t *testing.T) {
	e := newEnv(t, envConfig{})
	var v []float32
	for _, r := range e.dc.Corpus {
		if r.ID == "doc-42" {
			v = r.Vector
		}
	}
	require.NotNil(t, v)

	byVec := e.post("/v1/search", map[string]any{"vector": v, "k": 6})
	require.Equal(t, http.StatusOK, byVec.status, "%s", byVec.body)
	var av searchAnswer
	strictDecode(t, byVec.body, &av)
	require.Equal(t, "doc-42", av.Items[0].ID, "a document is its own nearest neighbour")

	byID := e.post("/v1/search", map[string]any{"like_id": "doc-42", "k": 5})
	require.Equal(t, http.StatusOK, byID.status, "%s", byID.body)
	var ai searchAnswer
	strictDecode(t, byID.body, &ai)
	require.Equal(t, av.Items[1:], ai.Items, "like_id answers the vector's neighbours minus itself")
	require.Equal(t, e.reference(v, 5, "doc-42")[0].ID, ai.Items[0].ID)
}

func TestUpsertGetDelete(t *testing.T) {
	e := newEnv(t, envConfig{})
	ids := []string{"new-1", "new 2 50%", "ünïcode-3", "x"}
	raw := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	var vs []map[string]any
	for i, id := range ids {
		v := slices.Clone(raw)
		v[0] = float32(i + 1)
		if i%2 == 0 {
			vs = append(vs, map[string]any{"id": id, "vector": v})
		} else {
			vs = append(vs, map[string]any{"id": id, "vector_b64": b64(v)})
		}
	}
	before := e.StoreState()
	res := e.post("/v1/vectors", map[string]any{"vectors": vs})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.JSONEq(t, `{"results": [{"id": "new-1", "status": "ok"}, {"id": "new 2 50%", "status": "ok"},
		{"id": "ünïcode-3", "status": "ok"}, {"id": "x", "status": "ok"}]}`, string(res.body))
	total := func(s [][]int) (n int) {
		for _, row := range s {
			n += slices.Max(row) // the leader's count: followers follow a moment later
		}
		return n
	}
	require.Equal(t, total(before)+len(ids), total(e.StoreState()), "the leader applied them by the acknowledgement")

	for i, id := range ids {
		t.Run("get "+id, func(t *testing.T) {
			home := e.homeOf(id)
			require.NotEmpty(t, home)
			res := e.do(http.MethodGet, "/v1/vectors/"+url.PathEscape(id), "", nil)
			require.Equal(t, http.StatusOK, res.status, "%s", res.body)
			require.Equal(t, []string{"id", "vector", "payload", "shard"}, objectKeys(t, res.body))
			var g struct {
				ID      string          `json:"id"`
				Vector  []float32       `json:"vector"`
				Payload json.RawMessage `json:"payload"`
				Shard   string          `json:"shard"`
			}
			strictDecode(t, res.body, &g)
			require.Equal(t, "{}", string(g.Payload), "no payload was written")
			require.Equal(t, id, g.ID)
			require.Equal(t, home, g.Shard)
			want := slices.Clone(raw)
			want[0] = float32(i + 1)
			require.True(t, vector.Generic().Normalize(want))
			require.InDeltaSlice(t, toF64(want), toF64(g.Vector), 1e-6, "stored copy is the normalised vector")
		})
	}

	// Upserting again is idempotent and replaces the vector.
	res = e.post("/v1/vectors", map[string]any{"vectors": []any{map[string]any{"id": "new-1", "vector": vec(-1)}}})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Equal(t, total(before)+len(ids), total(e.StoreState()), "the leader applied them by the acknowledgement")
	res = e.post("/v1/search", map[string]any{"vector": vec(-1), "k": 1})
	var sa searchAnswer
	strictDecode(t, res.body, &sa)
	require.Equal(t, "new-1", sa.Items[0].ID)
	require.InDelta(t, 1.0, sa.Items[0].Score, 1e-6)
	require.Equal(t, e.homeOf("new-1"), sa.Items[0].Shard)

	for _, id := range ids {
		t.Run("delete "+id, func(t *testing.T) {
			p := "/v1/vectors/" + url.PathEscape(id)
			res := e.do(http.MethodDelete, p, "", nil)
			require.Equal(t, http.StatusOK, res.status, "%s", res.body)
			require.JSONEq(t, jsonOf(t, map[string]string{"id": id, "status": "ok"}), string(res.body))
			require.Empty(t, e.homeOf(id))
			res = e.do(http.MethodDelete, p, "", nil)
			require.Equal(t, http.StatusOK, res.status, "%s", res.body)
			require.JSONEq(t, jsonOf(t, map[string]string{"id": id, "status": "not_found"}), string(res.body))
			requireError(t, e.do(http.MethodGet, p, "", nil), http.StatusNotFound, "not_found", false)
		})
	}
	require.Equal(t, before, e.StoreState())
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func TestDegradedAnswers(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.StopShard("shard-1")
	q := map[string]any{"vector": vec(1), "k": 5}

	t.Run("allow_partial default", func(t *testing.T) {
		res := e.post("/v1/search?deadline_ms=500", q)
		require.Equal(t, http.StatusOK, res.status, "%s", res.body)
		require.Equal(t, "true", res.header.Get("X-Trawl-Degraded"))
		var a searchAnswer
		strictDecode(t, res.body, &a)
		sg := a.ScatterGather
		require.True(t, sg.Degraded)
		require.Equal(t, 3, sg.ShardsTotal)
		require.Equal(t, 2, sg.ShardsQueried)
		require.Equal(t, []string{"shard-1"}, sg.UnavailableShards)
		require.Equal(t, map[string]string{"shard-1": "unavailable"}, sg.ShardErrors)
		require.Greater(t, sg.Coverage, 0.0)
		require.Less(t, sg.Coverage, 1.0)
		require.Len(t, a.Items, 5)
		for _, it := range a.Items {
			require.NotEqual(t, "shard-1", it.Shard)
		}
	})

	for _, c := range []struct{ name, path, body string }{
		{"search", "/v1/search?deadline_ms=500", `{"vector": ` + good8 + `, "allow_partial": false}`},
		{"batch", "/v1/search/batch?deadline_ms=500", `{"queries": [{"vector": ` + good8 + `}, {"like_id": "doc-3"}], "allow_partial": false}`},
	} {
		t.Run("allow_partial false "+c.name, func(t *testing.T) {
			res := e.do(http.MethodPost, c.path, c.body, nil)
			msg := requireError(t, res, http.StatusServiceUnavailable, "unavailable", true)
			require.Contains(t, msg, "allow_partial")
			require.Equal(t, "true", res.header.Get("X-Trawl-Degraded"))
			require.Equal(t, []string{"error", "scatter_gather"}, objectKeys(t, res.body))
			m := members(t, res.body)
			require.Equal(t, sgKeys, objectKeys(t, m["scatter_gather"]))
			var sg sgJSON
			strictDecode(t, m["scatter_gather"], &sg)
			require.True(t, sg.Degraded)
			require.Equal(t, []string{"shard-1"}, sg.UnavailableShards)
			require.Equal(t, 2, sg.ShardsQueried)
		})
	}

	t.Run("no shard answered", func(t *testing.T) {
		e.StopShard("shard-0")
		e.StopShard("shard-2")
		res := e.post("/v1/search", q)
		requireError(t, res, http.StatusServiceUnavailable, "unavailable", true)
		require.Equal(t, "true", res.header.Get("X-Trawl-Degraded"))
		var sg sgJSON
		strictDecode(t, members(t, res.body)["scatter_gather"], &sg)
		require.Equal(t, 0, sg.ShardsQueried)
		require.Equal(t, []string{"shard-0", "shard-1", "shard-2"}, sg.UnavailableShards)
		require.Equal(t, 0.0, sg.Coverage)
	})
}

// TestEscapedIDInPath: an id is any 1..256 bytes, so GET and DELETE must
// find it whatever the client percent-escapes in the path. chi matches on
// r.URL.RawPath when the client's escaping differs from Go's default
// ("a%2Fb", "user%3A42"), and its URL params are then still escaped, so
// the handlers look up the wrong id.
func TestEscapedIDInPath(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, c := range []struct{ id, path string }{
		{"a/b", "a%2Fb"},
		{"user:42", "user%3A42"}, // what encodeURIComponent sends
		{"x+y", "x%2By"},
	} {
		t.Run(c.id, func(t *testing.T) {
			res := e.post("/v1/vectors", map[string]any{"vectors": []any{map[string]any{"id": c.id, "vector": vec(1)}}})
			require.Equal(t, http.StatusOK, res.status, "%s", res.body)
			require.NotEmpty(t, e.homeOf(c.id))

			res = e.do(http.MethodGet, "/v1/vectors/"+c.path, "", nil)
			require.Equal(t, http.StatusOK, res.status, "BUG: GET /v1/vectors/%s: %s", c.path, res.body)
			require.JSONEq(t, jsonOf(t, c.id), jsonOf(t, members(t, res.body)["id"]))

			res = e.do(http.MethodDelete, "/v1/vectors/"+c.path, "", nil)
			require.Equal(t, http.StatusOK, res.status, "%s", res.body)
			require.JSONEq(t, jsonOf(t, map[string]string{"id": c.id, "status": "ok"}), string(res.body),
				"BUG: DELETE /v1/vectors/%s", c.path)
			require.Empty(t, e.homeOf(c.id))
		})
	}
}

// /cluster/status shows each replica's place in its consensus group: one
// leader per shard, every replica serving, and no lag once the followers
// have applied the last write.
func TestClusterStatusShowsConsensus(t *testing.T) {
	e := newEnv(t, envConfig{})
	res := e.post("/v1/vectors", map[string]any{"vectors": []any{map[string]any{"id": "status-1", "vector": vec(3)}}})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	type replica struct {
		Addr         string `json:"addr"`
		Role         string `json:"role"`
		Serving      bool   `json:"serving"`
		CommitIndex  uint64 `json:"commit_index"`
		AppliedIndex uint64 `json:"applied_index"`
		Lag          uint64 `json:"lag"`
	}
	var st struct {
		Shards []struct {
			Name     string    `json:"name"`
			Replicas []replica `json:"replicas"`
		} `json:"shards"`
	}
	// EventuallyWithT: the condition runs on another goroutine, where
	// require's FailNow would not stop the test.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res := e.do(http.MethodGet, "/cluster/status", "", nil)
		require.Equal(c, http.StatusOK, res.status)
		require.NoError(c, json.Unmarshal(res.body, &st))
		for _, s := range st.Shards {
			leaders := 0
			for _, r := range s.Replicas {
				if r.Role == "leader" {
					leaders++
				}
				assert.True(c, r.Serving && r.Lag == 0 && r.AppliedIndex != 0, "shard %s replica %+v", s.Name, r)
			}
			assert.Equal(c, 1, leaders, "shard %s leaders", s.Name)
		}
	}, 5*time.Second, 20*time.Millisecond)
}

// TestClusterStatusShape pins /cluster/status's members, in order, and the
// measured scan rate: every replica's, and the largest shard one core
// scans within the default per-shard budget, which shard_budget_ms names
// (45 ms: the 50 ms plaintext default less the network allowance).
func TestClusterStatusShape(t *testing.T) {
	e := newEnv(t, envConfig{ScanRateBytes: 1 << 20})
	var body []byte
	var st struct {
		Shards []struct {
			Replicas []struct {
				ScanRate          float64 `json:"scan_rate"`
				MaxRowsInDeadline uint64  `json:"max_rows_in_deadline"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	measured := func() bool {
		res := e.do(http.MethodGet, "/cluster/status", "", nil)
		require.Equal(t, http.StatusOK, res.status)
		body = res.body
		require.NoError(t, json.Unmarshal(body, &st))
		for _, s := range st.Shards {
			for _, r := range s.Replicas {
				if r.ScanRate <= 0 {
					return false
				}
			}
		}
		return true
	}
	require.Eventually(t, measured, 30*time.Second, 20*time.Millisecond, "%s", body)
	top := members(t, body)
	require.Equal(t, []string{"collections", "disagreements", "shard_budget_ms", "shards"}, objectKeys(t, body))
	require.JSONEq(t, `[{"name": "trawl", "dimension": 8, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory"}]`, string(top["collections"]))
	require.JSONEq(t, "995", string(top["shard_budget_ms"]), "the shard budget of the configured default deadline")
	var shards []json.RawMessage
	require.NoError(t, json.Unmarshal(top["shards"], &shards))
	require.Len(t, shards, 3)
	require.Equal(t, []string{"name", "doc_count", "replicas"}, objectKeys(t, shards[0]))
	var reps []json.RawMessage
	require.NoError(t, json.Unmarshal(members(t, shards[0])["replicas"], &reps))
	require.Equal(t, []string{"addr", "conn_state", "suspect", "consecutive_failures", "last_error", "latency_ms", "kernel",
		"doc_count", "role", "serving", "commit_index", "applied_index", "lag",
		"catalog_version", "collections", "scan_rate", "scan_rate_live", "max_rows_in_deadline"}, objectKeys(t, reps[0]))
	var colls []json.RawMessage
	require.NoError(t, json.Unmarshal(members(t, reps[0])["collections"], &colls))
	require.Len(t, colls, 1)
	require.Equal(t, []string{"name", "uid", "doc_count", "bytes", "index"}, objectKeys(t, colls[0]))
	for _, s := range st.Shards {
		for _, r := range s.Replicas {
			// Sized at 1536-D, the default dimension: the rate is a
			// replica's, whatever its collections' dimensions.
			require.Equal(t, shard.MaxRowsWithin(r.ScanRate, 1536, testDeadline-5*time.Millisecond), r.MaxRowsInDeadline)
			require.Positive(t, r.MaxRowsInDeadline)
		}
	}
}

// TestExactOversampleNProbeAccepted: the three scan options are accepted
// on a search and on every batch query whatever the shards run (these are
// unquantized, so every answer is exact: scatter_gather.exact is true).
func TestExactOversampleNProbeAccepted(t *testing.T) {
	e := newEnv(t, envConfig{})
	res := e.post("/v1/search?deadline_ms=1000", map[string]any{"vector": vec(1), "k": 5, "exact": false, "oversample": 32, "nprobe": 8})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	var a searchAnswer
	strictDecode(t, res.body, &a)
	require.Len(t, a.Items, 5)
	require.True(t, a.ScatterGather.Exact, "unquantized shards scan exactly")
	res = e.post("/v1/search/batch?deadline_ms=1000", map[string]any{"queries": []any{
		map[string]any{"vector": vec(1), "exact": true},
		map[string]any{"vector": vec(2), "oversample": 1, "nprobe": 1},
	}})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, string(members(t, res.body)["scatter_gather"]), `"coverage":1,"exact":true,`)
}

// TestClusterStatusShowsIndex: every replica says what its approximate
// queries scan; these shards are flat and unquantized, so nothing beside
// the float32 rows.
func TestClusterStatusShowsIndex(t *testing.T) {
	e := newEnv(t, envConfig{})
	res := e.do(http.MethodGet, "/cluster/status", "", nil)
	require.Equal(t, http.StatusOK, res.status)
	var st struct {
		Shards []struct {
			Replicas []struct {
				Collections []struct {
					DocCount uint64          `json:"doc_count"`
					Index    json.RawMessage `json:"index"`
				} `json:"collections"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	require.NoError(t, json.Unmarshal(res.body, &st))
	require.NotEmpty(t, st.Shards)
	for _, s := range st.Shards {
		require.NotEmpty(t, s.Replicas)
		for _, r := range s.Replicas {
			require.Len(t, r.Collections, 1)
			c := r.Collections[0]
			require.JSONEq(t, fmt.Sprintf(`{"kind": "flat", "state": "ready", "lists": 0, "trained_rows": 0, "default_nprobe": 0,
				"nprobe_calibrated": false, "rows": %d, "bytes": 0, "bytes_per_vector": 0}`, c.DocCount), string(c.Index))
		}
	}
}

// TestBuiltinDefaultDeadline: a router without --default-deadline-ms gives
// a query that names no deadline 50 ms and its shards 45 ms, and says so
// in /cluster/status. The answer is complete or honestly marked: a loaded
// machine may miss 50 ms, and then every missing shard says why.
func TestBuiltinDefaultDeadline(t *testing.T) {
	e := newEnv(t, envConfig{BuiltinDeadline: true})
	res := e.post("/v1/search", map[string]any{"vector": []float32{1, 0, 0, 0, 0, 0, 0, 0}, "k": 3})
	var a searchAnswer
	require.NoError(t, json.Unmarshal(res.body, &a), "%s", res.body)
	require.EqualValues(t, 50, a.ScatterGather.DeadlineMS)
	require.EqualValues(t, 45, a.ScatterGather.ShardDeadlineMS)
	require.Equal(t, a.ScatterGather.Degraded, res.header.Get("X-Trawl-Degraded") == "true")
	for s, why := range a.ScatterGather.ShardErrors {
		require.Equal(t, "deadline_exceeded", why, "%s: %s", s, res.body)
	}
	st := e.do(http.MethodGet, "/cluster/status", "", nil)
	require.Equal(t, http.StatusOK, st.status)
	require.JSONEq(t, "45", string(members(t, st.body)["shard_budget_ms"]))
}
