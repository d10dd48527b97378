package filter

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseErrorsNameThePlace(t *testing.T) {
	deep := `{"must": {"key": "a", "match": {"value": 1}}}`
	for range 8 {
		deep = `{"must": [` + deep + `]}`
	}
	many := `{"should": [`
	for i := range 65 {
		if i > 0 {
			many += ","
		}
		many += `{"key": "a", "match": {"value": 1}}`
	}
	many += `]}`
	for _, tc := range []struct{ in, want string }{
		{`[]`, "filter: is an array, want a filter object"},
		{`null`, "filter: is null, want a filter object"},
		{`{"must": [{"key": "a", "match": {"value": 1}}, {"key": "y", "range": {}}]}`, "filter.must[1].range: needs at least one of gt, gte, lt, lte"},
		{`{"must": [{"key": "y", "range": {"gt": null}}]}`, "filter.must[0].range: needs at least one of gt, gte, lt, lte"},
		{`{"must": [{"key": "y", "range": {"gt": "1"}}]}`, "filter.must[0].range.gt: is not a datetime; want RFC 3339 like 2014-01-01T00:00:00Z (or without zone, UTC)"},
		{`{"must": [{"key": "y", "range": {"between": 1}}]}`, "filter.must[0].range.between: unknown bound; range takes gt, gte, lt, lte"},
		{`{"must": [{"key": "y", "range": 3}]}`, "filter.must[0].range: is an integer, want an object of gt, gte, lt, lte"},
		{`{"must": {"key": "c", "values_count": {"gt": 1.5}}}`, "filter.must.values_count.gt: is 1.5, want a whole number of values, 0 or more"},
		{`{"must": {"key": "c", "values_count": {"lt": -1}}}`, "filter.must.values_count.lt: is -1, want a whole number of values, 0 or more"},
		{`{"must": {"key": "c", "values_count": {}}}`, "filter.must.values_count: needs at least one of gt, gte, lt, lte"},
		{`{"must": {"key": "c", "values_count": {"eq": 1}}}`, "filter.must.values_count.eq: unknown bound; range takes gt, gte, lt, lte"},
		{`{"must": {"key": "c", "values_count": {"gt": 1}, "range": {"gt": 1}}}`, "filter.must: has more than one of match, range, values_count, geo_radius, geo_bounding_box and geo_polygon; give one"},
		{`{"filter": {}}`, "filter.filter: unknown clause; a filter has must, should, must_not and min_should"},
		{`{"must": 3}`, "filter.must: is an integer, want a condition or a list of conditions"},
		{`{"must": [3]}`, "filter.must[0]: is an integer, want a condition object"},
		{`{"must": {"key": "", "match": {"value": 1}}}`, "filter.must.key: is empty"},
		{`{"must": {"key": "a..b", "match": {"value": 1}}}`, `filter.must.key: "a..b" has an empty segment; a key is a dotted path like meta.draft`},
		{`{"must": {"key": ".a", "match": {"value": 1}}}`, `filter.must.key: ".a" has an empty segment; a key is a dotted path like meta.draft`},
		{`{"must": {"key": 5, "match": {"value": 1}}}`, "filter.must.key: is an integer, want a string"},
		{`{"must": {"key": "a"}}`, "filter.must: has a key but no match, range, values_count or geo area"},
		{`{"must": {"key": "a", "match": {"value": 1}, "range": {"gt": 1}}}`, "filter.must: has more than one of match, range, values_count, geo_radius, geo_bounding_box and geo_polygon; give one"},
		{`{"must": {"key": "a", "match": {"value": 1}, "boost": 2}}`, "filter.must.boost: unknown field; a keyed condition has match, range, values_count, geo_radius, geo_bounding_box or geo_polygon"},
		{`{"must": {"key": "a", "match": {"value": 1.5}}}`, "filter.must.match.value: is a number, want a string, an integer or a boolean"},
		{`{"must": {"key": "a", "match": {"value": null}}}`, "filter.must.match.value: is null, want a string, an integer or a boolean"},
		{`{"must": {"key": "a", "match": {"value": [1]}}}`, "filter.must.match.value: is an array, want a string, an integer or a boolean"},
		{`{"must": {"key": "a", "match": {"any": ["x", 1]}}}`, "filter.must.match.any[1]: is an integer, but the list holds a string; a list is all strings or all integers"},
		{`{"must": {"key": "a", "match": {"any": [true]}}}`, "filter.must.match.any[0]: is a boolean, want a string or an integer"},
		{`{"must": {"key": "a", "match": {"except": "x"}}}`, "filter.must.match.except: is a string, want a list of strings or of integers"},
		{`{"must": {"key": "a", "match": {"prefix": "x"}}}`, "filter.must.match.prefix: is not supported; match takes value, any, except, text, text_any or phrase"},
		{`{"must": {"key": "a", "match": {"like": "x"}}}`, "filter.must.match.like: unknown operator; match takes value, any, except, text, text_any or phrase"},
		{`{"must": {"key": "a", "match": {}}}`, "filter.must.match: is empty; give one of value, any, except, text, text_any or phrase"},
		{`{"must": {"key": "a", "match": {"value": 1, "any": [1]}}}`, "filter.must.match: has 2 operators; give one of value, any, except, text, text_any or phrase"},
		{`{"must": {"has_vector": "v"}}`, "filter.must.has_vector: is not supported; conditions are key with match, range, values_count or a geo area, is_empty, is_null, has_id, nested, or a nested filter"},
		{`{"must": {"is_empty": {"field": "a"}}}`, `filter.must.is_empty.field: unknown field; is_empty takes only "key"`},
		{`{"must": {"is_empty": {}}}`, "filter.must.is_empty.key: is missing"},
		{`{"must": {"is_null": "a"}}`, `filter.must.is_null: is a string, want {"key": "..."}`},
		{`{"must": {"is_null": {"key": "a"}, "x": 1}}`, "filter.must.x: unexpected beside is_null"},
		{`{"must": {"wat": 1}}`, "filter.must.wat: unknown condition; conditions are key with match, range, values_count or a geo area, is_empty, is_null, has_id, nested, or a nested filter of must, should and must_not"},
		{`{"must": [{"must_not": [{"key": "a", "range": {"lt": true}}]}]}`, "filter.must[0].must_not[0].range.lt: is a boolean, want a number"},
		{`{"must": {"key": "a", "range": {"gt": 1e400}}}`, "filter.must.range.gt: number 1e400 is beyond the float64 range"},
		{`{"must": [], "must": []}`, "filter.must: repeats a key"},
		{`{"must": [`, "filter.must: bad JSON: unexpected EOF"},
		{`{} {}`, "filter: has data after its JSON value"},
		{deep, "filter.must[0].must[0].must[0].must[0].must[0].must[0].must[0].must[0]: is nested deeper than 8 filters"},
		{many, "filter: has more than 64 conditions"},
	} {
		_, err := Parse([]byte(tc.in))
		require.Error(t, err, tc.in)
		var fe *Error
		require.ErrorAs(t, err, &fe)
		require.Equal(t, tc.want, err.Error(), tc.in)
	}
}

func TestParseLimitsAreInclusive(t *testing.T) {
	deep := `{"key": "a", "match": {"value": 1}}`
	for range 7 {
		deep = `{"must": [` + deep + `]}`
	}
	f, err := Parse([]byte(`{"must": [` + deep + `]}`))
	require.NoError(t, err, "8 levels")
	require.Equal(t, OpFilter, f.Must[0].Op)

	many := `{"should": [`
	for i := range 64 {
		if i > 0 {
			many += ","
		}
		many += `{"key": "a", "match": {"value": 1}}`
	}
	_, err = Parse([]byte(many + `]}`))
	require.NoError(t, err, "64 conditions")
}

func TestParseCanonicalRoundTrip(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"must": {"key": "lang", "match": {"value": "en"}}}`,
		`{"must": [{"key": "lang", "match": {"value": "en"}}, {"key": "year", "range": {"gte": 2020, "lt": 2026}}],
		  "should": [{"key": "tags", "match": {"any": ["go", "rust"]}}],
		  "must_not": [{"key": "meta.draft", "match": {"value": true}}, {"is_empty": {"key": "title"}}]}`,
		`{"must_not": {"key": "n", "match": {"except": [1, -2, 9007199254740993]}}, "should": null}`,
		`{"must": [{"should": [{"is_null": {"key": "a.b.c"}}, {}]}, {"key": "x", "range": {"gt": -0.5, "lte": 1e300}}]}`,
		`{"must": {"key": "s", "match": {"value": "quote\" and \u00e9 and \u2028"}}}`,
		`{"must_not": {"key": "tags", "values_count": {"gte": 2, "lt": 4}}}`,
	} {
		f, err := Parse([]byte(in))
		require.NoError(t, err, in)
		b, err := json.Marshal(f)
		require.NoError(t, err)
		g, err := Parse(b)
		require.NoError(t, err, string(b))
		require.Equal(t, f, g, string(b))
		b2, _ := json.Marshal(g)
		require.Equal(t, string(b), string(b2))
	}
	f, err := Parse([]byte(`{"must_not": {"key": "n", "match": {"except": [1]}}, "must": {"key": "a", "match": {"value": false}}}`))
	require.NoError(t, err)
	b, _ := json.Marshal(f)
	require.JSONEq(t, `{"must":[{"key":"a","match":{"value":false}}],"must_not":[{"key":"n","match":{"except":[1]}}]}`, string(b))
}

func doc(t *testing.T, s string) map[string]any {
	t.Helper()
	b, err := CheckPayload([]byte(s))
	require.NoError(t, err)
	m, err := DecodePayload(b)
	require.NoError(t, err)
	return m
}

func TestMatchSemantics(t *testing.T) {
	d := `{"lang": "en", "year": 2021, "score": 0.5, "f": 2020.0, "tags": ["go", "rust", 7, null], "nums": [1, 2.5],
	       "meta": {"draft": true, "n": null, "e": [], "o": {}}, "title": null, "empty": [], "big": 9007199254740993}`
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{`{}`, true},
		{`{"must": {"key": "lang", "match": {"value": "en"}}}`, true},
		{`{"must": {"key": "lang", "match": {"value": "de"}}}`, false},
		{`{"must": {"key": "lang", "match": {"value": 1}}}`, false},              // type mismatch
		{`{"must": {"key": "year", "match": {"value": "2021"}}}`, false},         // type mismatch
		{`{"must": {"key": "year", "match": {"value": 2021}}}`, true},            // integer
		{`{"must": {"key": "f", "match": {"value": 2020}}}`, false},              // a float is not an integer
		{`{"must": {"key": "f", "range": {"gte": 2020, "lte": 2020}}}`, true},    // but ranges read it
		{`{"must": {"key": "big", "match": {"value": 9007199254740993}}}`, true}, // exact past 2^53
		{`{"must": {"key": "big", "match": {"value": 9007199254740992}}}`, false},
		{`{"must": {"key": "missing", "match": {"value": 1}}}`, false},
		// values_count counts as Qdrant does: an array its length (nulls
		// included), null and a missing key 0, any other value 1.
		{`{"must": {"key": "tags", "values_count": {"gt": 3}}}`, true},
		{`{"must": {"key": "tags", "values_count": {"gt": 4}}}`, false},
		{`{"must": {"key": "tags", "values_count": {"gte": 4, "lte": 4}}}`, true},
		{`{"must": {"key": "lang", "values_count": {"lte": 1, "gte": 1}}}`, true},
		{`{"must": {"key": "meta.o", "values_count": {"gte": 1}}}`, true},
		{`{"must": {"key": "missing", "values_count": {"lt": 1}}}`, true},
		{`{"must": {"key": "missing", "values_count": {"gt": 0}}}`, false},
		{`{"must": {"key": "title", "values_count": {"lte": 0}}}`, true},
		{`{"must": {"key": "empty", "values_count": {"lt": 1}}}`, true},
		{`{"must": {"key": "meta.e", "values_count": {"gte": 1}}}`, false},
		{`{"must_not": {"key": "missing", "match": {"value": 1}}}`, true},
		{`{"must": {"key": "title", "match": {"value": "x"}}}`, false}, // null
		{`{"must": {"key": "tags", "match": {"value": "go"}}}`, true},  // any element
		{`{"must": {"key": "tags", "match": {"value": 7}}}`, true},
		{`{"must": {"key": "tags", "match": {"any": ["c", "rust"]}}}`, true},
		{`{"must": {"key": "tags", "match": {"any": []}}}`, false},
		// except is any negated, element by element, as Qdrant checks a
		// payload: an element of another type is outside the list, a null
		// element is not.
		{`{"must": {"key": "tags", "match": {"except": ["go", "rust"]}}}`, true}, // 7 is outside
		{`{"must": {"key": "tags", "match": {"except": ["go"]}}}`, true},         // rust is outside
		{`{"must": {"key": "tags", "match": {"except": [7]}}}`, true},            // so are the strings
		{`{"must": {"key": "lang", "match": {"except": ["de"]}}}`, true},
		{`{"must": {"key": "lang", "match": {"except": ["en"]}}}`, false},
		{`{"must": {"key": "lang", "match": {"except": [1]}}}`, true},     // another type
		{`{"must": {"key": "f", "match": {"except": [2020]}}}`, true},     // a float is not an integer
		{`{"must": {"key": "title", "match": {"except": ["x"]}}}`, false}, // null
		{`{"must": {"key": "empty", "match": {"except": ["x"]}}}`, false}, // []
		{`{"must": {"key": "missing", "match": {"except": ["x"]}}}`, false},
		{`{"must": {"key": "lang", "match": {"except": []}}}`, true},
		{`{"must": {"key": "meta.draft", "match": {"value": true}}}`, true},
		{`{"must": {"key": "meta.draft", "match": {"value": 1}}}`, false},
		{`{"must": {"key": "meta.draft.x", "match": {"value": true}}}`, false},
		{`{"must": {"key": "year", "range": {"gt": 2020, "lt": 2022}}}`, true},
		{`{"must": {"key": "year", "range": {"gt": 2021}}}`, false},
		{`{"must": {"key": "year", "range": {"gte": 2021}}}`, true},
		{`{"must": {"key": "year", "range": {"lt": 2021}}}`, false},
		{`{"must": {"key": "year", "range": {"lte": 2021}}}`, true},
		{`{"must": {"key": "lang", "range": {"lte": 2021}}}`, false}, // not a number
		{`{"must": {"key": "nums", "range": {"gt": 2, "lt": 3}}}`, true},
		{`{"must": {"key": "score", "range": {"gt": 0.4999, "lt": 0.5001}}}`, true},
		{`{"must": {"is_empty": {"key": "missing"}}}`, true},
		{`{"must": {"is_empty": {"key": "title"}}}`, true},
		{`{"must": {"is_empty": {"key": "empty"}}}`, true},
		{`{"must": {"is_empty": {"key": "meta.e"}}}`, true},
		{`{"must": {"is_empty": {"key": "meta.o"}}}`, false},
		{`{"must": {"is_empty": {"key": "tags"}}}`, false},
		{`{"must": {"is_empty": {"key": "lang"}}}`, false},
		{`{"must": {"is_null": {"key": "title"}}}`, true},
		{`{"must": {"is_null": {"key": "meta.n"}}}`, true},
		{`{"must": {"is_null": {"key": "missing"}}}`, false},
		{`{"must": {"is_null": {"key": "empty"}}}`, false},
		{`{"must": {"is_null": {"key": "lang"}}}`, false},
		{`{"should": [{"key": "lang", "match": {"value": "de"}}, {"key": "year", "match": {"value": 2021}}]}`, true},
		{`{"should": [{"key": "lang", "match": {"value": "de"}}, {"key": "year", "match": {"value": 1}}]}`, false},
		{`{"should": []}`, true},
		{`{"must_not": [{"key": "lang", "match": {"value": "de"}}, {"is_null": {"key": "lang"}}]}`, true},
		{`{"must_not": [{"key": "lang", "match": {"value": "de"}}, {"is_null": {"key": "title"}}]}`, false},
		{`{"must": [{"must_not": {"key": "lang", "match": {"value": "en"}}}]}`, false},
		{`{"must": [{"should": [{"key": "x", "match": {"value": 1}}, {"must": {"key": "lang", "match": {"value": "en"}}}]}]}`, true},
		{`{"must": [{}]}`, true},
	} {
		f, err := Parse([]byte(tc.filter))
		require.NoError(t, err, tc.filter)
		require.Equal(t, tc.want, f.Match(doc(t, d)), tc.filter)
	}
	// A document without payload: only is_empty and negations hold.
	f, _ := Parse([]byte(`{"must": {"is_empty": {"key": "a"}}, "must_not": {"key": "a", "match": {"value": 1}}}`))
	require.True(t, f.Match(nil))
	f, _ = Parse([]byte(`{"must": {"is_null": {"key": "a"}}}`))
	require.False(t, f.Match(nil))
}

func TestCheckPayload(t *testing.T) {
	deep := `1`
	for range 8 {
		deep = `{"a": ` + deep + `}`
	}
	tooDeep := `{"a": ` + deep + `}`
	long := `{"s": "` + string(make([]byte, 0)) + pad(MaxPayloadBytes) + `"}`
	for _, tc := range []struct{ in, want string }{
		{`[]`, "payload: is an array, want a JSON object"},
		{`"x"`, "payload: is a string, want a JSON object"},
		{`null`, "payload: is null, want a JSON object"},
		{`{"a": 1, "a": 2}`, "payload.a: repeats a key"},
		{`{"a": {"b": [1, {"c": [[1]]}]}}`, "payload.a.b[1].c[0]: is an array inside an array; array elements must be strings, numbers, booleans, null or objects"},
		{`{"a": [[1]]}`, "payload.a[0]: is an array inside an array; array elements must be strings, numbers, booleans, null or objects"},
		{`{"a": {"b": 1e999}}`, "payload.a.b: number 1e999 is beyond the float64 range"},
		{tooDeep, "payload.a.a.a.a.a.a.a.a: is nested deeper than 8 levels"},
		{`{"a": [1, 2`, "payload.a: bad JSON: unexpected EOF"},
		{"{\"a\": \"\xff\"}", "payload: is not valid UTF-8"},
		{long, "payload: is 65544 bytes encoded, over the 65536-byte limit"},
	} {
		_, err := CheckPayload([]byte(tc.in))
		require.Error(t, err, tc.in)
		require.Equal(t, tc.want, err.Error())
	}
	b, err := CheckPayload([]byte(deep))
	require.NoError(t, err, "8 levels")
	require.Equal(t, `{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":1}}}}}}}}`, string(b))
	b, err = CheckPayload([]byte(" {\"a\" : [1, 2.50, null, true, \"x\"],\n \"b\": {}} "))
	require.NoError(t, err)
	require.Equal(t, `{"a":[1,2.50,null,true,"x"],"b":{}}`, string(b), "compacted, number literals kept")
	m, err := DecodePayload(b)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"a": []any{int64(1), 2.5, nil, true, "x"}, "b": map[string]any{}}, m)
}

func pad(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}
