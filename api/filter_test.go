package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// TestBadFilterInput: every malformed filter, with_payload and
// score_threshold answers 400 with exactly this body, on /v1/search and
// per query on /v1/search/batch (naming the query), and no shard is
// called.
func TestBadFilterInput(t *testing.T) {
	e := newEnv(t, envConfig{})
	deep := `{"key": "a", "match": {"value": 1}}`
	for range 9 {
		deep = `{"must": [` + deep + `]}`
	}
	conds := make([]string, 65)
	for i := range conds {
		conds[i] = `{"key": "a", "match": {"value": 1}}`
	}
	many := `{"should": [` + strings.Join(conds, ",") + `]}`
	for _, tc := range []struct {
		name, member, msg string
	}{
		{"unknown operator", `"filter": {"must": {"key": "a", "match": {"like": "x"}}}`, "filter.must.match.like: unknown operator; match takes value, any, except, text, text_any or phrase"},
		{"unsupported operator", `"filter": {"must": {"key": "a", "match": {"prefix": "x"}}}`, "filter.must.match.prefix: is not supported; match takes value, any, except, text, text_any or phrase"},
		{"unknown clause", `"filter": {"must": [], "filter": []}`, "filter.filter: unknown clause; a filter has must, should, must_not and min_should"},
		{"unknown condition", `"filter": {"should": [{"key": "a", "match": {"value": 1}}, {"geo": 1}]}`, "filter.should[1].geo: unknown condition; conditions are key with match, range, values_count or a geo area, is_empty, is_null, has_id, nested, or a nested filter of must, should and must_not"},
		{"unsupported condition", `"filter": {"must": {"has_vector": "v"}}`, "filter.must.has_vector: is not supported; conditions are key with match, range, values_count or a geo area, is_empty, is_null, has_id, nested, or a nested filter"},
		{"float match", `"filter": {"must": {"key": "a", "match": {"value": 1.5}}}`, "filter.must.match.value: is a number, want a string, an integer or a boolean"},
		{"mixed any", `"filter": {"must": {"key": "a", "match": {"any": ["x", 2]}}}`, "filter.must.match.any[1]: is an integer, but the list holds a string; a list is all strings or all integers"},
		{"range value type", `"filter": {"must": {"key": "y", "range": {"gte": "2020"}}}`, "filter.must.range.gte: is not a datetime; want RFC 3339 like 2014-01-01T00:00:00Z (or without zone, UTC)"},
		{"range without bounds", `"filter": {"must": [{"key": "a", "match": {"value": "x"}}, {"key": "y", "range": {}}]}`, "filter.must[1].range: needs at least one of gt, gte, lt, lte"},
		{"empty key", `"filter": {"must_not": {"is_empty": {"key": ""}}}`, "filter.must_not.is_empty.key: is empty"},
		{"empty segment", `"filter": {"must": {"key": "meta..draft", "match": {"value": true}}}`, `filter.must.key: \"meta..draft\" has an empty segment; a key is a dotted path like meta.draft`},
		{"nesting over 8", `"filter": ` + deep, "filter.must[0].must[0].must[0].must[0].must[0].must[0].must[0].must[0]: is nested deeper than 8 filters"},
		{"over 64 conditions", `"filter": ` + many, "filter: has more than 64 conditions"},
		{"filter not an object", `"filter": [1]`, "filter: is an array, want a filter object"},
		{"with_payload number", `"with_payload": 1`, "with_payload is a number, want true, false or a list of top-level keys"},
		{"with_payload object", `"with_payload": {"include": ["a"]}`, "with_payload is an object, want true, false or a list of top-level keys"},
		{"with_payload empty key", `"with_payload": ["a", ""]`, "with_payload[1] is empty, want a top-level payload key"},
	} {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%v", tc.name, batch), func(t *testing.T) {
				q := `{"vector": ` + good8 + `, ` + tc.member + `}`
				path, body, msg := "/v1/search", q, tc.msg
				if batch {
					path, body, msg = "/v1/search/batch", `{"queries": [{"vector": `+good8+`}, `+q+`]}`, "queries[1]: "+tc.msg
				}
				store, rpcs := e.StoreState(), e.ShardRPCs()
				res := e.do(http.MethodPost, path, body, nil)
				require.Equal(t, http.StatusBadRequest, res.status, "%s", res.body)
				require.Equal(t, `{"error":{"code":"invalid_argument","message":"`+msg+`"}}`, apitest.CompactJSON(t, res.body))
				require.Equal(t, rpcs, e.ShardRPCs(), "a shard RPC was made for a bad filter")
				require.Equal(t, store, e.StoreState())
			})
		}
	}
	res := e.do(http.MethodPost, "/v1/search", `{"vector": `+good8+`, "score_threshold": "0.5"}`, nil)
	msg := requireError(t, res, http.StatusBadRequest, "invalid_argument", false)
	require.Contains(t, msg, "score_threshold")
}

// TestBadPayloadInput: a write with any bad payload is refused whole with
// exactly this body, naming the entry and the place, and nothing reaches
// a shard.
func TestBadPayloadInput(t *testing.T) {
	e := newEnv(t, envConfig{})
	deep := `1`
	for range 8 {
		deep = `{"a": ` + deep + `}`
	}
	for _, tc := range []struct{ name, payload, msg string }{
		{"array", `[1, 2]`, "payload: is an array, want a JSON object"},
		{"string", `"x"`, "payload: is a string, want a JSON object"},
		{"number", `3`, "payload: is an integer, want a JSON object"},
		{"nesting over 8", `{"a": ` + deep + `}`, "payload.a.a.a.a.a.a.a.a: is nested deeper than 8 levels"},
		{"array in an array", `{"m": [[1]]}`, "payload.m[0]: is an array inside an array; array elements must be strings, numbers, booleans, null or objects"},
		{"repeated key", `{"a": 1, "a": 2}`, "payload.a: repeats a key"},
		{"number beyond float64", `{"n": 1e400}`, "payload.n: number 1e400 is beyond the float64 range"},
		{"over 64 KiB", `{"s": "` + strings.Repeat("x", 64<<10) + `"}`, "payload: is 65544 bytes encoded, over the 65536-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"vectors": [{"id": "p-ok-0", "vector": ` + good8 + `, "payload": {"lang": "en"}},
			                      {"id": "p-bad", "vector": ` + good8 + `, "payload": ` + tc.payload + `}]}`
			store, rpcs := e.StoreState(), e.ShardRPCs()
			res := e.do(http.MethodPost, "/v1/vectors", body, nil)
			require.Equal(t, http.StatusBadRequest, res.status, "%s", res.body)
			require.Equal(t, `{"error":{"code":"invalid_argument","message":"vectors[1]: `+tc.msg+`"}}`, apitest.CompactJSON(t, res.body))
			require.Equal(t, rpcs, e.ShardRPCs(), "a refused write reached a shard")
			require.Equal(t, store, e.StoreState())
			e.RequireAbsent("p-ok-0", "p-bad")
		})
	}
}

// TestPayloadsAndFilters: payloads written come back from GET and from
// searches per with_payload, a filter keeps only matching documents,
// score_threshold cuts the list, and a batch carries each query's own.
func TestPayloadsAndFilters(t *testing.T) {
	e := newEnv(t, envConfig{})
	var vs []string
	for i := range 40 {
		v := make([]string, testDim)
		for j := range v {
			v[j] = fmt.Sprint((i*7+j*3)%11 - 5)
		}
		v[i%testDim] = "9"
		lang := []string{"en", "de"}[i%2]
		// Keys of their own: the dev corpus's documents carry lang, year
		// and tags too.
		vs = append(vs, fmt.Sprintf(`{"id": "pf-%d", "vector": [%s], "payload": {"plang": %q, "pyear": %d, "ptags": ["t%d"], "meta": {"draft": %v}}}`,
			i, strings.Join(v, ","), lang, 2000+i, i%3, i%4 == 0))
	}
	res := e.do(http.MethodPost, "/v1/vectors", `{"vectors": [`+strings.Join(vs, ",")+`]}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	res = e.do(http.MethodGet, "/v1/vectors/pf-3", "", nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	var g struct {
		Payload json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(res.body, &g))
	require.JSONEq(t, `{"plang": "de", "pyear": 2003, "ptags": ["t0"], "meta": {"draft": false}}`, string(g.Payload))

	type hit struct {
		ID      string         `json:"id"`
		Score   float64        `json:"score"`
		Payload map[string]any `json:"payload"`
	}
	search := func(body string) []hit {
		t.Helper()
		res := e.do(http.MethodPost, "/v1/search?deadline_ms=2000", body, nil)
		require.Equal(t, http.StatusOK, res.status, "%s", res.body)
		var a struct {
			Items []hit `json:"items"`
		}
		require.NoError(t, json.Unmarshal(res.body, &a))
		return a.Items
	}
	q := `"vector": ` + good8 + `, "k": 40`
	all := search(`{` + q + `}`)
	for _, h := range all {
		require.Nil(t, h.Payload, "no payload unless asked")
	}
	en := search(`{` + q + `, "with_payload": ["plang", "absent"], "filter": {"must": {"key": "plang", "match": {"value": "en"}}, "must_not": {"key": "meta.draft", "match": {"value": true}}}}`)
	require.Len(t, en, 10)
	for _, h := range en {
		require.Equal(t, map[string]any{"plang": "en"}, h.Payload, h.ID)
	}
	few := search(`{` + q + `, "with_payload": true, "filter": {"must": {"key": "pyear", "range": {"gte": 2010, "lt": 2013}}}}`)
	require.Len(t, few, 3, "fewer than k match")
	for _, h := range few {
		require.Len(t, h.Payload, 4)
	}
	require.Empty(t, search(`{`+q+`, "filter": {"must": {"key": "pyear", "match": {"value": "2010"}}}}`), "a type mismatch matches nothing")
	th := all[4].Score
	cut := search(fmt.Sprintf(`{%s, "score_threshold": %v}`, q, th))
	require.GreaterOrEqual(t, len(cut), 5)
	for _, h := range cut {
		require.GreaterOrEqual(t, h.Score, th)
	}

	res = e.do(http.MethodPost, "/v1/search/batch?deadline_ms=2000", `{"queries": [
		{`+q+`, "filter": {"must": {"key": "ptags", "match": {"any": ["t1"]}}}, "with_payload": ["ptags"]},
		{`+q+`, "filter": {"must": {"key": "ptags", "match": {"except": ["t1"]}}}},
		{`+q+`}]}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	var b struct {
		Results []struct {
			Items []hit `json:"items"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(res.body, &b))
	require.Len(t, b.Results[0].Items, 13)
	for _, h := range b.Results[0].Items {
		require.Equal(t, map[string]any{"ptags": []any{"t1"}}, h.Payload)
	}
	require.Len(t, b.Results[1].Items, 27)
	require.Len(t, b.Results[2].Items, 40)
}
