package qdrant_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// TestQdrantFilterConditions: each condition Qdrant's filters have,
// through the REST routes end to end (router, shards, payload index),
// counted and scrolled on points of Qdrant's documented examples.
func TestQdrantFilterConditions(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	res := e.Do(http.MethodPut, "/collections/trawl/points?wait=true", `{"points": [
		{"id": 11, "vector": `+unit(0)+`, "payload": {"suite": "conds", "dinosaur": "t-rex",
			"diet": [{"food": "leaves", "likes": false}, {"food": "meat", "likes": true}],
			"date": "2023-02-08T10:49:00Z", "location": {"lon": 52.5, "lat": 13.43}, "description": "good cheap food", "color": ["black", "yellow"]}},
		{"id": 12, "vector": `+unit(1)+`, "payload": {"suite": "conds", "dinosaur": "diplodocus",
			"diet": [{"food": "leaves", "likes": true}, {"food": "meat", "likes": false}],
			"date": "2024-01-31 10:14:31", "location": {"lon": 52.520711, "lat": 13.403683}, "description": "cheap and good", "color": "red"}},
		{"id": "`+strings.ToUpper(uuidA)+`", "vector": `+unit(2)+`, "payload": {"suite": "conds", "diet": null, "color": null,
			"date": "2023-06-01", "location": [{"lon": 0, "lat": 0}, {"lon": 52.51, "lat": 13.41}], "reports": []}}]}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	suite := `{"key": "suite", "match": {"value": "conds"}}`
	for _, tc := range []struct {
		name, cond string
		want       string // the ids scrolled, in id order
	}{
		{"has_id", `{"has_id": [11, "` + strings.ReplaceAll(uuidA, "-", "") + `", 404]}`, `11,"` + uuidA + `"`},
		{"is_empty", `{"is_empty": {"key": "reports"}}`, `11,12,"` + uuidA + `"`},
		{"is_null", `{"is_null": {"key": "diet"}}`, `"` + uuidA + `"`},
		{"nested", `{"nested": {"key": "diet", "filter": {"must": [{"key": "food", "match": {"value": "meat"}}, {"key": "likes", "match": {"value": true}}]}}}`, `11`},
		{"datetime", `{"key": "date", "range": {"gt": "2023-02-08T10:49:00Z", "lte": "2024-01-31T11:14:31+01:00"}}`, `12,"` + uuidA + `"`},
		{"except", `{"key": "color", "match": {"except": ["black", "yellow"]}}`, `12`},
		{"text", `{"key": "description", "match": {"text": "good cheap"}}`, `11`},
		{"geo_radius", `{"key": "location", "geo_radius": {"center": {"lon": 52.520711, "lat": 13.403683}, "radius": 2000.0}}`, `12,"` + uuidA + `"`},
		{"geo_bounding_box", `{"key": "location", "geo_bounding_box": {"top_left": {"lon": 52.495862, "lat": 13.455868}, "bottom_right": {"lon": 52.520711, "lat": 13.403683}}}`, `11,"` + uuidA + `"`},
		{"geo_polygon", `{"key": "location", "geo_polygon": {"exterior": {"points": [{"lon": 50, "lat": 10}, {"lon": 55, "lat": 10}, {"lon": 55, "lat": 15}, {"lon": 50, "lat": 15}, {"lon": 50, "lat": 10}]},
			"interiors": [{"points": [{"lon": 52.51, "lat": 13.4}, {"lon": 52.53, "lat": 13.4}, {"lon": 52.53, "lat": 13.41}, {"lon": 52.51, "lat": 13.41}, {"lon": 52.51, "lat": 13.4}]}]}}`, `11`}, // 12 in the hole, the UUID's second point on its edge
		{"min_should", `{"min_should": {"conditions": [{"has_id": [12]}, {"key": "color", "match": {"value": "red"}}, {"is_null": {"key": "diet"}}], "min_count": 2}}`, `12`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"filter": {"must": [` + suite + `, ` + tc.cond + `]}, "limit": 10, "with_payload": false}`
			res := e.Do(http.MethodPost, "/collections/trawl/points/scroll?deadline_ms=2000", body, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			var ids []string
			for _, m := range regexpID.FindAllStringSubmatch(string(res.Body), -1) {
				ids = append(ids, m[1])
			}
			require.Equal(t, tc.want, strings.Join(ids, ","), "%s", res.Body)
		})
	}
	// Malformed: a Qdrant-style 400 naming the member.
	res = e.Do(http.MethodPost, "/collections/trawl/points/count", `{"filter": {"must": {"nested": {"key": "diet", "filter": {"must": {"has_id": [1]}}}}}}`, nil)
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Equal(t, `{"status":{"error":"Bad request: filter.must.nested.filter: has a has_id condition; inside nested, conditions test the array's elements, which have no ids"},"time":0}`, normalised(t, res.Body))
}

var regexpID = regexp.MustCompile(`"id":("[^"]*"|[0-9]+)`)
