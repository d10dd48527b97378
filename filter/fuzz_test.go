package filter

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var fuzzFilters = []string{
	`{}`,
	`{"must": [{"key": "lang", "match": {"value": "en"}}, {"key": "year", "range": {"gte": 2020, "lt": 2026}}],
	  "should": [{"key": "tags", "match": {"any": ["go", "rust"]}}],
	  "must_not": [{"key": "meta.draft", "match": {"value": true}}, {"is_empty": {"key": "title"}}]}`,
	`{"must": {"key": "n", "match": {"except": [1, 2]}}, "should": null}`,
	`{"must": [{"should": [{"is_null": {"key": "a.b"}}, {}]}]}`,
	`{"must": {"key": "a", "range": {"gt": null, "lte": 1.5e3}}}`,
	`{"must": {"key": "a..b", "match": {"value": 1}}}`,
	`{"must": {"key": "a", "match": {"value": 1.5}}}`,
	`{"must": [{"has_id": [1, "550E8400E29B41D4A716446655440000", "doc-7"]}, {"is_empty": {"key": "e"}}]}`,
	`{"must": {"nested": {"key": "arr", "filter": {"must": [{"key": "k", "match": {"value": "x"}}], "must_not": {"is_null": {"key": "n"}}}}}}`,
	`{"must": {"key": "d", "range": {"gt": "2023-02-08T10:49:00Z", "gte": null, "lte": "2024-01-31 10:14:31"}}}`,
	`{"must_not": {"key": "tags", "match": {"except": ["go"]}}, "should": {"key": "t", "match": {"text": "go r"}}}`,
	`{"must": {"key": "t", "match": {"text_any": "a b"}}, "should": {"key": "t", "match": {"phrase": "a b"}}}`,
	`{"must": {"key": "g", "geo_radius": {"center": {"lon": 52.52, "lat": 13.4}, "radius": 1000.0}}}`,
	`{"must": {"key": "g", "geo_bounding_box": {"top_left": {"lon": 170, "lat": 20}, "bottom_right": {"lon": -170, "lat": 10}}}}`,
	`{"must": {"key": "g", "geo_polygon": {"exterior": {"points": [{"lon": -70, "lat": -70}, {"lon": 60, "lat": -70}, {"lon": 60, "lat": 60}, {"lon": -70, "lat": 60}, {"lon": -70, "lat": -70}]},
	  "interiors": [{"points": [{"lon": -65, "lat": -65}, {"lon": 0, "lat": -65}, {"lon": 0, "lat": 0}, {"lon": -65, "lat": 0}, {"lon": -65, "lat": -65}]}]}}}`,
	`{"min_should": {"conditions": [{"key": "a", "match": {"value": 1}}, {"has_id": [2]}, {"must": {"is_null": {"key": "b"}}}], "min_count": 2}}`,
	`{"must": {"key": "g", "geo_polygon": {"exterior": {"points": [{"lon": 0, "lat": 0}]}}}}`,
	`{"must": {"nested": {"key": "a", "filter": {"must": {"has_id": [1]}}}}}`,
}

var fuzzPayloads = []string{
	`{"lang": "en", "year": 2021, "tags": ["go", "rust", 7, null], "meta": {"draft": true, "n": null}, "title": null}`,
	`{"a": {"b": [1, 2.5, "x", false]}, "n": 2}`,
	`{}`,
	`{"year": 2020.0, "empty": []}`,
	`{"arr": [{"k": "x", "n": null}, {"k": "y", "n": 1}, 3, null], "d": ["2023-06-01", "x", 5], "t": "go rust", "g": {"lon": 52.52, "lat": 13.4}}`,
	`{"g": [{"lon": -30, "lat": -30}, {"lon": 30, "lat": 30.5}], "tags": ["go", true, 1.5]}`,
}

// FuzzParse: Parse never panics, and a filter it accepts marshals to a
// canonical form that parses back to the same filter and marshals the same.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzFilters {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		flt, err := Parse(b)
		if err != nil {
			var fe *Error
			require.ErrorAs(t, err, &fe)
			return
		}
		c, err := json.Marshal(flt)
		require.NoError(t, err)
		again, err := Parse(c)
		require.NoError(t, err, "canonical form %s", c)
		require.Equal(t, flt, again)
		c2, _ := json.Marshal(again)
		require.Equal(t, string(c), string(c2))
	})
}

// FuzzMatch: for any payload and filter that validate, Match never panics,
// a must_not of the filter is its negation, and its canonical form
// evaluates the same.
func FuzzMatch(f *testing.F) {
	for _, p := range fuzzPayloads {
		for _, s := range fuzzFilters {
			f.Add([]byte(p), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, pb, fb []byte) {
		stored, err := CheckPayload(pb)
		if err != nil {
			return
		}
		flt, err := Parse(fb)
		if err != nil {
			return
		}
		d, err := DecodePayload(stored)
		require.NoError(t, err, "a checked payload decodes")
		got := flt.Match(d)
		not := &Filter{MustNot: []Condition{{Op: OpFilter, Nested: flt}}}
		require.Equal(t, !got, not.Match(d))
		c, _ := json.Marshal(flt)
		again, err := Parse(c)
		require.NoError(t, err)
		require.Equal(t, got, again.Match(d))
	})
}

// FuzzParseTreeFastPath: the fastjson path and the token walker decode
// every input to the same tree, or refuse it with the same first error,
// for filters (any arrays) and payloads (scalar arrays) alike. Inputs the
// walker refuses as broken JSON may be refused by the fast path's
// validator first and then by the walker, so their errors match too.
func FuzzParseTreeFastPath(f *testing.F) {
	for _, s := range append(append([]string{}, fuzzFilters...), fuzzPayloads...) {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":[[1]]}`, `{"a":"\ud800"}`, `{"a":"\u00e9\n"}`, `[1,2] x`,
		`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":NaN}`, `{"a":"x` + "\x01" + `"}`, `{"a":{"b":{"c":{"d":{"e":{"f":1}}}}}}`,
		` {"a" : 1e400 } `, `{"a":-0.0,"b":12345678901234567890}`, `{"\u0061":1,"a":2}`, `"\t"`, "{\"a\":\"\\q\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, tc := range []struct {
			depth  int
			scalar bool
		}{{maxJSONDepth, false}, {MaxDepth, true}, {3, true}} {
			root := path{"x"}
			got, gerr := parseTree(b, root, tc.depth, tc.scalar)
			var want any
			var werr error
			if utf8.Valid(b) {
				want, werr = walkTree(b, root, tc.depth, tc.scalar)
			} else {
				werr = root.errorf("is not valid UTF-8")
			}
			if werr != nil {
				require.Error(t, gerr, "walker refused %q: %v", b, werr)
				require.Equal(t, werr.Error(), gerr.Error(), "%q", b)
				continue
			}
			require.NoError(t, gerr, "%q", b)
			require.Equal(t, want, got, "%q", b)
		}
	})
}
