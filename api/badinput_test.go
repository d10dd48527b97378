package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type badCase struct {
	name   string
	path   string
	body   string
	status int
	code   string
	// msg, when set, must appear in the error message.
	msg string
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// good8 is a valid query vector as JSON.
const good8 = "[1,2,3,4,5,6,7,8]"

func searchCases(t *testing.T) []badCase {
	nan := f32(1)
	nan[3] = float32(math.NaN())
	inf := f32(1)
	inf[0] = float32(math.Inf(1))
	ninf := f32(1)
	ninf[7] = float32(math.Inf(-1))
	big := vec(1)
	big[2] = 1e39
	const p = "/v1/search"
	bad := func(name, body, msg string) badCase {
		return badCase{name: name, path: p, body: body, status: 400, code: "invalid_argument", msg: msg}
	}
	return []badCase{
		bad("bad JSON", `{"vector": [1,2,3`, "bad JSON"),
		bad("not an object", `[1,2,3]`, "bad JSON"),
		bad("empty body", ``, "empty"),
		bad("JSON NaN literal", `{"vector": [NaN,1,1,1,1,1,1,1]}`, "bad JSON"),
		bad("unknown field", `{"vector": `+good8+`, "kk": 3}`, "unknown field"),
		bad("unknown field allow_partials", `{"vector": `+good8+`, "allow_partials": false}`, "unknown field"),
		bad("trailing object", `{"vector": `+good8+`} {}`, "trailing data"),
		bad("trailing garbage", `{"vector": `+good8+`} x`, "trailing data"),
		bad("wrong dimension", `{"vector": [1,2,3,4,5,6,7]}`, "vector has 7 dimensions, want 8"),
		bad("empty vector", `{"vector": []}`, "vector has 0 dimensions, want 8"),
		bad("wrong dimension b64", jsonOf(t, map[string]any{"vector_b64": b64(make([]float32, 9))}), "vector has 9 dimensions, want 8"),
		bad("beyond float32", jsonOf(t, map[string]any{"vector": big}), "beyond the float32 range"),
		bad("beyond float32 negative", `{"vector": [1,1,1,1,1,1,1,-1e39]}`, "beyond the float32 range"),
		bad("NaN b64", jsonOf(t, map[string]any{"vector_b64": b64(nan)}), "element 3"),
		bad("+Inf b64", jsonOf(t, map[string]any{"vector_b64": b64(inf)}), "element 0"),
		bad("-Inf b64", jsonOf(t, map[string]any{"vector_b64": b64(ninf)}), "element 7"),
		bad("b64 not base64", `{"vector_b64": "!!!not base64"}`, "not valid base64"),
		bad("b64 partial float", `{"vector_b64": "AAAAAAA="}`, "not a whole number of float32"),
		bad("zero vector cosine", jsonOf(t, map[string]any{"vector": vec(0)}), "zeros"),
		bad("zero vector b64 cosine", jsonOf(t, map[string]any{"vector_b64": b64(f32(0))}), "zeros"),
		bad("negative zero vector cosine", jsonOf(t, map[string]any{"vector_b64": b64(f32(float32(math.Copysign(0, -1))))}), "zeros"),
		bad("k=0", `{"vector": `+good8+`, "k": 0}`, "k is 0, want 1..1000"),
		bad("k=1001", `{"vector": `+good8+`, "k": 1001}`, "k is 1001, want 1..1000"),
		bad("k=-1", `{"vector": `+good8+`, "k": -1}`, "k is -1"),
		bad("k=1.5", `{"vector": `+good8+`, "k": 1.5}`, ""),
		bad("k string", `{"vector": `+good8+`, "k": "3"}`, ""),
		bad("k huge", `{"vector": `+good8+`, "k": 99999999999999999999}`, ""),
		bad("exact string", `{"vector": `+good8+`, "exact": "true"}`, "exact"),
		bad("exact number", `{"vector": `+good8+`, "exact": 1}`, "exact"),
		bad("exact object", `{"vector": `+good8+`, "exact": {}}`, "exact"),
		bad("oversample=0", `{"vector": `+good8+`, "oversample": 0}`, "oversample is 0, want 1..32"),
		bad("oversample=33", `{"vector": `+good8+`, "oversample": 33}`, "oversample is 33, want 1..32"),
		bad("oversample=-1", `{"vector": `+good8+`, "oversample": -1}`, "oversample is -1"),
		bad("oversample=1.5", `{"vector": `+good8+`, "oversample": 1.5}`, "oversample"),
		bad("oversample string", `{"vector": `+good8+`, "oversample": "4"}`, "oversample"),
		bad("nprobe=0", `{"vector": `+good8+`, "nprobe": 0}`, "nprobe is 0, want at least 1"),
		bad("nprobe=-3", `{"vector": `+good8+`, "nprobe": -3}`, "nprobe is -3"),
		bad("nprobe string", `{"vector": `+good8+`, "nprobe": "8"}`, "nprobe"),
		bad("nprobe bool", `{"vector": `+good8+`, "nprobe": true}`, "nprobe"),
		bad("deadline_ms=0", `{"vector": `+good8+`}`, "deadline_ms").withPath(p + "?deadline_ms=0"),
		bad("deadline_ms=-1", `{"vector": `+good8+`}`, "deadline_ms").withPath(p + "?deadline_ms=-1"),
		bad("deadline_ms=abc", `{"vector": `+good8+`}`, "deadline_ms").withPath(p + "?deadline_ms=abc"),
		bad("deadline_ms=1.5", `{"vector": `+good8+`}`, "deadline_ms").withPath(p + "?deadline_ms=1.5"),
		bad("deadline_ms empty", `{"vector": `+good8+`}`, "deadline_ms").withPath(p + "?deadline_ms="),
		bad("deadline_ms twice", `{"vector": `+good8+`}`, "deadline_ms").withPath(p + "?deadline_ms=10&deadline_ms=20"),
		bad("deadline_ms 10ms", `{"vector": `+good8+`}`, "deadline_ms").withPath(p + "?deadline_ms=10ms"),
		bad("shard_detail=yes", `{"vector": `+good8+`}`, "shard_detail").withPath(p + "?shard_detail=yes"),
		bad("vector and vector_b64", jsonOf(t, map[string]any{"vector": vec(1), "vector_b64": b64(f32(1))}), "exactly one"),
		bad("vector and like_id", `{"vector": `+good8+`, "like_id": "doc-1"}`, "exactly one"),
		bad("vector_b64 and like_id", jsonOf(t, map[string]any{"like_id": "doc-1", "vector_b64": b64(f32(1))}), "exactly one"),
		bad("all three", jsonOf(t, map[string]any{"vector": vec(1), "like_id": "doc-1", "vector_b64": b64(f32(1))}), "exactly one"),
		bad("none", `{"k": 3}`, "exactly one"),
		bad("like_id empty", `{"like_id": ""}`, "like_id"),
		bad("like_id too long", jsonOf(t, map[string]any{"like_id": strings.Repeat("x", 257)}), "like_id"),
		{name: "like_id unknown", path: p + "?deadline_ms=1000", body: `{"like_id": "no-such-doc"}`, status: 404, code: "not_found", msg: "no-such-doc"},
	}
}

func (c badCase) withPath(p string) badCase { c.path = p; return c }

func batchCases(t *testing.T) []badCase {
	const p = "/v1/search/batch"
	q := `{"vector": ` + good8 + `}`
	many := func(n int) string {
		qs := make([]string, n)
		for i := range qs {
			qs[i] = q
		}
		return `{"queries": [` + strings.Join(qs, ",") + `]}`
	}
	bad := func(name, body, msg string) badCase {
		return badCase{name: name, path: p, body: body, status: 400, code: "invalid_argument", msg: msg}
	}
	return []badCase{
		bad("bad JSON", `{"queries": [`, "bad JSON"),
		bad("unknown field", `{"queries": [`+q+`], "k": 3}`, "unknown field"),
		bad("trailing data", `{"queries": [`+q+`]}]`, "trailing data"),
		bad("0 queries", `{"queries": []}`, "queries has 0 entries, want 1..256"),
		bad("no queries", `{}`, "queries has 0 entries"),
		bad("null queries", `{"queries": null}`, "queries has 0 entries"),
		bad("257 queries", many(257), "queries has 257 entries, want 1..256"),
		bad("wrong dimension at 2", `{"queries": [`+q+`,`+q+`,{"vector":[1,2,3,4,5,6,7]},`+q+`]}`, "queries[2]: vector has 7 dimensions, want 8"),
		bad("k=0 at 1", `{"queries": [`+q+`,{"vector":`+good8+`,"k":0}]}`, "queries[1]: k is 0"),
		bad("unknown field at 2", `{"queries": [`+q+`,`+q+`,{"vector":`+good8+`,"allow_partial":false}]}`, "queries[2]:"),
		bad("not an object at 0", `{"queries": [3]}`, "queries[0]:"),
		bad("two of at 2", `{"queries": [`+q+`,`+q+`,{"vector":`+good8+`,"like_id":"doc-1"}]}`, "queries[2]: give exactly one"),
		bad("zero vector at 0", jsonOf(t, map[string]any{"queries": []any{map[string]any{"vector": vec(0)}}}), "queries[0]:"),
		bad("deadline_ms=0", many(2), "deadline_ms").withPath(p + "?deadline_ms=0"),
		bad("exact string at 1", `{"queries": [`+q+`,{"vector":`+good8+`,"exact":"yes"}]}`, "queries[1]: bad JSON"),
		bad("oversample=33 at 2", `{"queries": [`+q+`,`+q+`,{"vector":`+good8+`,"oversample":33}]}`, "queries[2]: oversample is 33, want 1..32"),
		bad("oversample=0 at 0", `{"queries": [{"vector":`+good8+`,"oversample":0},`+q+`]}`, "queries[0]: oversample is 0"),
		bad("nprobe=0 at 1", `{"queries": [`+q+`,{"vector":`+good8+`,"nprobe":0}]}`, "queries[1]: nprobe is 0, want at least 1"),
		bad("nprobe string at 0", `{"queries": [{"vector":`+good8+`,"nprobe":"2"}]}`, "queries[0]: bad JSON"),
		bad("exact at batch level", `{"queries": [`+q+`], "exact": true}`, "unknown field"),
	}
}

// TestBadSearchInput: every bad search answers 400 (404 for an unknown
// like_id) with the exact error shape, and nothing reaches a shard: no shard
// RPC is recorded, no fan-out is counted, no stored data changes.
func TestBadSearchInput(t *testing.T) {
	e := newEnv(t, envConfig{})
	cases := append(searchCases(t), batchCases(t)...)
	for _, c := range cases {
		t.Run(strings.TrimPrefix(c.path, "/v1/")+"/"+c.name, func(t *testing.T) {
			store, rpcs := e.StoreState(), e.ShardRPCs()
			qs := e.mustCounter("trawl_scatter_queries_total", map[string]string{"path": "search", "collection": "trawl"})
			qb := e.mustCounter("trawl_scatter_queries_total", map[string]string{"path": "search_batch", "collection": "trawl"})

			res := e.do(http.MethodPost, c.path, c.body, nil)
			msg := requireError(t, res, c.status, c.code, false)
			if c.msg != "" {
				require.Contains(t, msg, c.msg)
			}
			require.NotEmpty(t, res.header.Get("X-Request-Id"))
			require.Empty(t, res.header.Get("X-Trawl-Degraded"), "a refused request is not a fan-out")

			require.Equal(t, store, e.StoreState())
			require.Equal(t, qs, e.mustCounter("trawl_scatter_queries_total", map[string]string{"path": "search", "collection": "trawl"}))
			require.Equal(t, qb, e.mustCounter("trawl_scatter_queries_total", map[string]string{"path": "search_batch", "collection": "trawl"}))
			if c.status == 400 {
				require.Equal(t, rpcs, e.ShardRPCs(), "a shard RPC was made for bad input")
			}
		})
	}
}

// TestBadWriteInput: a write with any invalid entry is refused whole with
// a 400 naming the index, and nothing is stored on any replica.
func TestBadWriteInput(t *testing.T) {
	e := newEnv(t, envConfig{})
	valid := func(id string) map[string]any { return map[string]any{"id": id, "vector": vec(1)} }
	withBad := func(bad map[string]any) string {
		return jsonOf(t, map[string]any{"vectors": []any{valid("w-ok-0"), valid("w-ok-1"), bad, valid("w-ok-3")}})
	}
	tooMany := make([]any, 257)
	for i := range tooMany {
		tooMany[i] = valid(fmt.Sprintf("w-many-%d", i))
	}
	nan := f32(1)
	nan[1] = float32(math.NaN())
	bad := func(name, body, msg string) badCase {
		return badCase{name: name, path: "/v1/vectors", body: body, status: 400, code: "invalid_argument", msg: msg}
	}
	cases := []badCase{
		bad("bad JSON", `{"vectors": [{"id": "x"`, "bad JSON"),
		bad("unknown field", `{"vectors": [{"id": "w-ok-0", "vector": `+good8+`}], "upsert": true}`, "unknown field"),
		bad("trailing data", `{"vectors": [{"id": "w-ok-0", "vector": `+good8+`}]} {}`, "trailing data"),
		bad("0 vectors", `{"vectors": []}`, "vectors has 0 entries, want 1..256"),
		bad("257 vectors", jsonOf(t, map[string]any{"vectors": tooMany}), "vectors has 257 entries, want 1..256"),
		bad("missing id", withBad(map[string]any{"vector": vec(1)}), `vectors[2]: missing "id"`),
		bad("empty id", withBad(map[string]any{"id": "", "vector": vec(1)}), "vectors[2]: id is 0 bytes, want 1..256"),
		bad("id 257 bytes", withBad(map[string]any{"id": strings.Repeat("é", 128) + "x", "vector": vec(1)}), "vectors[2]: id is 257 bytes, want 1..256"),
		bad("duplicate id", withBad(valid("w-ok-0")), `vectors[2]: id "w-ok-0" repeats vectors[0]`),
		bad("wrong dimension", withBad(map[string]any{"id": "w-bad", "vector": []float64{1, 2, 3}}), "vectors[2]: vector has 3 dimensions, want 8"),
		bad("beyond float32", withBad(map[string]any{"id": "w-bad", "vector": append(vec(1)[:7], 1e39)}), "vectors[2]: vector element 7"),
		bad("NaN b64", withBad(map[string]any{"id": "w-bad", "vector_b64": b64(nan)}), "vectors[2]: vector element 1"),
		bad("zero vector", withBad(map[string]any{"id": "w-bad", "vector": vec(0)}), "vectors[2]: vector is all zeros"),
		bad("both vector and b64", withBad(map[string]any{"id": "w-bad", "vector": vec(1), "vector_b64": b64(f32(1))}), "vectors[2]: give exactly one"),
		bad("neither vector nor b64", withBad(map[string]any{"id": "w-bad"}), "vectors[2]: give exactly one"),
		bad("unknown field in entry", withBad(map[string]any{"id": "w-bad", "vector": vec(1), "k": 1}), "vectors[2]: bad JSON"),
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store, rpcs := e.StoreState(), e.ShardRPCs()
			res := e.do(http.MethodPost, c.path, c.body, nil)
			msg := requireError(t, res, c.status, c.code, false)
			require.Contains(t, msg, c.msg)
			require.Equal(t, store, e.StoreState(), "a refused write changed stored data")
			require.Equal(t, rpcs, e.ShardRPCs(), "a refused write reached a shard")
			e.RequireAbsent("w-ok-0", "w-ok-1", "w-ok-3", "w-bad", "w-many-0", "w-many-256")
		})
	}
}

// TestBadVectorIDPath: GET and DELETE of an id over 256 bytes are 400, an
// unknown id is 404 not_found, and nothing changes.
func TestBadVectorIDPath(t *testing.T) {
	e := newEnv(t, envConfig{})
	store := e.StoreState()
	long := strings.Repeat("a", 257)

	requireError(t, e.do(http.MethodGet, "/v1/vectors/"+long, "", nil), 400, "invalid_argument", false)
	requireError(t, e.do(http.MethodDelete, "/v1/vectors/"+long, "", nil), 400, "invalid_argument", false)
	msg := requireError(t, e.do(http.MethodGet, "/v1/vectors/no-such-doc", "", nil), 404, "not_found", false)
	require.Contains(t, msg, "no-such-doc")
	requireError(t, e.do(http.MethodGet, "/v1/vectors/doc-1?deadline_ms=0", "", nil), 400, "invalid_argument", false)
	requireError(t, e.do(http.MethodGet, "/v1/no-such-endpoint", "", nil), 404, "not_found", false)
	requireError(t, e.do(http.MethodPut, "/v1/search", "{}", nil), 405, "method_not_allowed", false)
	require.Equal(t, store, e.StoreState())
}

// TestBodyTooLarge: a body over 8 MiB is 413 on every POST endpoint, and
// nothing is stored.
func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t, envConfig{})
	store, rpcs := e.StoreState(), e.ShardRPCs()
	// A syntactically valid start, so only the size can be the refusal.
	huge := `{"vectors": [{"id": "big", "vector": [` + strings.Repeat("1,", 4<<20) + `1]}]}`
	require.Greater(t, len(huge), 8<<20)
	for _, p := range []string{"/v1/search", "/v1/search/batch", "/v1/vectors"} {
		t.Run(p, func(t *testing.T) {
			res := e.doReader(http.MethodPost, p, bytes.NewReader([]byte(huge)), nil)
			requireError(t, res, http.StatusRequestEntityTooLarge, "payload_too_large", false)
			require.NotEmpty(t, res.header.Get("X-Request-Id"))
		})
	}
	require.Equal(t, store, e.StoreState())
	require.Equal(t, rpcs, e.ShardRPCs(), "a refused body reached a shard")
	e.RequireAbsent("big")
	// Exactly 8 MiB is not too large.
	exact := `{"k": 1, "vector": [` + strings.Repeat(" ", 8<<20-len(`{"k": 1, "vector": [`)-len(good8[1:])-1) + good8[1:] + `}`
	require.Len(t, exact, 8<<20)
	// The deadline clock starts before the body is read, so give the upload
	// and decode of 8 MiB time.
	res := e.doReader(http.MethodPost, "/v1/search?deadline_ms=5000", strings.NewReader(exact), nil)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
}

// TestAPIKey: with an API key, /v1/* and /cluster/status want
// "Authorization: Bearer <key>"; probes and /metrics stay open.
func TestAPIKey(t *testing.T) {
	e := newEnv(t, envConfig{APIKey: "s3cret"})
	store, rpcs := e.StoreState(), e.ShardRPCs()
	search := `{"vector": ` + good8 + `}`
	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret2", "Bearer  s3cret", "bearer s3cret", "s3cret", "Basic czNjcmV0"} {
		for _, r := range []struct{ method, path, body string }{
			{http.MethodPost, "/v1/search", search},
			{http.MethodPost, "/v1/search/batch", `{"queries": [` + search + `]}`},
			{http.MethodPost, "/v1/vectors", `{"vectors": [{"id": "k-1", "vector": ` + good8 + `}]}`},
			{http.MethodGet, "/v1/vectors/doc-1", ""},
			{http.MethodDelete, "/v1/vectors/doc-1", ""},
			{http.MethodPost, "/v1/search", `{bad json`},
			{http.MethodGet, "/v1/collections", ""},
			{http.MethodPut, "/v1/collections/k", ""},
			{http.MethodDelete, "/v1/collections/trawl", ""},
			{http.MethodPost, "/v1/collections/trawl/search", search},
		} {
			t.Run(fmt.Sprintf("%s %s auth=%q", r.method, r.path, auth), func(t *testing.T) {
				h := map[string]string{"X-Request-Id": "req-401"}
				if auth != "" {
					h["Authorization"] = auth
				}
				res := e.do(r.method, r.path, r.body, h)
				requireError(t, res, http.StatusUnauthorized, "unauthenticated", false)
				require.Equal(t, "req-401", res.header.Get("X-Request-Id"))
				require.NotEmpty(t, res.header.Get("WWW-Authenticate"))
			})
		}
	}
	require.Equal(t, store, e.StoreState())
	require.Equal(t, rpcs, e.ShardRPCs())
	e.RequireAbsent("k-1")

	for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
		res := e.do(http.MethodGet, p, "", nil)
		require.Equal(t, http.StatusOK, res.status, "%s: %s", p, res.body)
	}
	requireError(t, e.do(http.MethodGet, "/cluster/status", "", nil), http.StatusUnauthorized, "unauthenticated", false)
	key := map[string]string{"Authorization": "Bearer s3cret"}
	res := e.do(http.MethodGet, "/cluster/status", "", key)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res = e.do(http.MethodPost, "/v1/search", search, key)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
}

// TestMaxInflight: with --max-inflight 1 and one search held open by a
// slow shard, the next /v1/* request is refused at once with 429 and
// Retry-After, before it is even decoded.
func TestMaxInflight(t *testing.T) {
	e := newEnv(t, envConfig{MaxInflight: 1})
	for _, r := range e.dc.Replicas[0] {
		require.NoError(t, r.Proxy.Slow(600*time.Millisecond))
	}
	t.Cleanup(func() {
		for _, r := range e.dc.Replicas[0] {
			_ = r.Proxy.Restore()
		}
	})

	// Each HTTP refusal is timed once, in the router's handler.
	refusals := func() uint64 {
		mf := e.Gather()["trawl_admission_refusal_duration_seconds"]
		require.NotNil(t, mf, "no refusal histogram")
		return mf.GetMetric()[0].GetHistogram().GetSampleCount()
	}
	refusals0 := refusals()

	var wg sync.WaitGroup
	held := make(chan response, 1)
	start := time.Now()
	wg.Go(func() {
		held <- e.do(http.MethodPost, "/v1/search?deadline_ms=1000", `{"vector": `+good8+`}`, nil)
	})
	// The held search occupies the only slot within a few ms; until then a
	// probe may slip through and answer 400 (its body is bad on purpose, so
	// it never reaches a shard).
	var got response
	for {
		got = e.do(http.MethodPost, "/v1/search", `{bad`, map[string]string{"X-Request-Id": "req-429"})
		if got.status == http.StatusTooManyRequests {
			break
		}
		require.Equal(t, http.StatusBadRequest, got.status, "body: %s", got.body)
		require.Less(t, time.Since(start), 500*time.Millisecond, "never saw 429 while a request was held")
		time.Sleep(2 * time.Millisecond)
	}
	requireError(t, got, http.StatusTooManyRequests, "overloaded", false)
	require.Equal(t, "1", got.header.Get("Retry-After"))
	require.Equal(t, "req-429", got.header.Get("X-Request-Id"))
	require.Equal(t, refusals0+1, refusals(), "the one refusal is timed once; 400s are not refusals")
	// Probes and /metrics are not limited.
	require.Equal(t, http.StatusOK, e.do(http.MethodGet, "/readyz", "", nil).status)
	require.Equal(t, http.StatusOK, e.do(http.MethodGet, "/metrics", "", nil).status)

	wg.Wait()
	first := <-held
	require.Contains(t, []int{200}, first.status, "held search: %s", first.body)
	// The slot is free again.
	require.Equal(t, http.StatusBadRequest, e.do(http.MethodPost, "/v1/search", `{bad`, nil).status)
}

// TestRequestID: every answer carries X-Request-Id, the caller's when
// given (up to 128 bytes), else a fresh one.
func TestRequestID(t *testing.T) {
	e := newEnv(t, envConfig{})
	reqs := []struct{ method, path, body string }{
		{http.MethodPost, "/v1/search", `{"vector": ` + good8 + `}`},
		{http.MethodPost, "/v1/search", `{bad`},
		{http.MethodPost, "/v1/search/batch", `{"queries": []}`},
		{http.MethodGet, "/v1/vectors/no-such-doc", ""},
		{http.MethodGet, "/healthz", ""},
		{http.MethodGet, "/readyz", ""},
		{http.MethodGet, "/metrics", ""},
		{http.MethodGet, "/cluster/status", ""},
		{http.MethodGet, "/nope", ""},
	}
	for _, r := range reqs {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			res := e.do(r.method, r.path, r.body, map[string]string{"X-Request-Id": "caller-id-1"})
			require.Equal(t, "caller-id-1", res.header.Get("X-Request-Id"))
			a := e.do(r.method, r.path, r.body, nil).header.Get("X-Request-Id")
			b := e.do(r.method, r.path, r.body, nil).header.Get("X-Request-Id")
			require.NotEmpty(t, a)
			require.NotEqual(t, a, b, "generated ids repeat")
			long := strings.Repeat("x", 129)
			c := e.do(r.method, r.path, r.body, map[string]string{"X-Request-Id": long}).header.Get("X-Request-Id")
			require.NotEmpty(t, c)
			require.NotEqual(t, long, c, "an over-long id is replaced")
		})
	}
}
