package filter

import (
	"encoding/json"
	"testing"

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
}

var fuzzPayloads = []string{
	`{"lang": "en", "year": 2021, "tags": ["go", "rust", 7, null], "meta": {"draft": true, "n": null}, "title": null}`,
	`{"a": {"b": [1, 2.5, "x", false]}, "n": 2}`,
	`{}`,
	`{"year": 2020.0, "empty": []}`,
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
