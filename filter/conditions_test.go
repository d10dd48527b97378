package filter

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// point is a document of a table test: its id and payload.
type point struct {
	id      string
	payload string
}

// matching returns the ids of the points filter src matches.
func matching(t *testing.T, src string, pts []point) []string {
	t.Helper()
	f, err := Parse([]byte(src))
	require.NoError(t, err, src)
	// The canonical form answers the same.
	c, _ := json.Marshal(f)
	g, err := Parse(c)
	require.NoError(t, err, string(c))
	out := []string{}
	for _, p := range pts {
		var d map[string]any
		if p.payload != "" {
			d = doc(t, p.payload)
		}
		got := f.MatchPoint(p.id, d)
		require.Equal(t, got, g.MatchPoint(p.id, d), "canonical %s", c)
		if got {
			out = append(out, p.id)
		}
	}
	return out
}

// ids lists "1".."n" for the points table tests number from 1.
func ids(ns ...int) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, strconv.Itoa(n))
	}
	return out
}

// qdrantCities is the payload set of Qdrant's filtering documentation.
var qdrantCities = []point{
	{"1", `{"city": "London", "color": "green"}`},
	{"2", `{"city": "London", "color": "red"}`},
	{"3", `{"city": "London", "color": "blue"}`},
	{"4", `{"city": "Berlin", "color": "red"}`},
	{"5", `{"city": "Moscow", "color": "green"}`},
	{"6", `{"city": "Moscow", "color": "blue"}`},
}

func TestIsEmptyIsNullAsQdrant(t *testing.T) {
	// Qdrant's condition checker test: a missing key, null and [] are
	// empty, [null] is not; only null is null ([null] is not, nor []).
	pts := []point{
		{"1", `{"reports": []}`},
		{"2", `{"reports": null}`},
		{"3", `{}`},
		{"4", `{"reports": [null]}`},
		{"5", `{"reports": [1]}`},
		{"6", `{"reports": "x"}`},
		{"7", `{"reports": {}}`},
		{"8", ``},
	}
	require.Equal(t, ids(1, 2, 3, 8), matching(t, `{"must": [{"is_empty": {"key": "reports"}}]}`, pts))
	require.Equal(t, ids(2), matching(t, `{"must": [{"is_null": {"key": "reports"}}]}`, pts))
	require.Equal(t, ids(4, 5, 6, 7), matching(t, `{"must_not": [{"is_empty": {"key": "reports"}}]}`, pts))
}

func TestHasIDAsQdrant(t *testing.T) {
	pts := slices.Clone(qdrantCities)
	pts = append(pts, point{"550e8400-e29b-41d4-a716-446655440000", `{}`}, point{"doc-7", `{}`})
	require.Equal(t, ids(1, 3, 5), matching(t, `{"must": [{"has_id": [1, 3, 5, 7, 9, 11]}]}`, pts))
	// A UUID in any form Qdrant takes names its canonical id; another
	// string names itself.
	for _, u := range []string{"550e8400-e29b-41d4-a716-446655440000", "550E8400E29B41D4A716446655440000",
		"{550e8400-e29b-41d4-a716-446655440000}", "urn:uuid:550E8400-E29B-41D4-A716-446655440000"} {
		require.Equal(t, []string{"550e8400-e29b-41d4-a716-446655440000"}, matching(t, `{"must": {"has_id": [`+strconv.Quote(u)+`]}}`, pts), u)
	}
	require.Equal(t, []string{"doc-7"}, matching(t, `{"must": {"has_id": ["doc-7"]}}`, pts))
	require.Equal(t, []string{}, matching(t, `{"must": {"has_id": []}}`, pts))
	require.Equal(t, ids(2, 4, 6), matching(t, `{"must_not": {"has_id": [1, 3, 5]}, "should": {"has_id": [2, 4, 6, 8]}}`, qdrantCities))
	// Without the id, has_id holds for no document.
	f, err := Parse([]byte(`{"must": {"has_id": [1]}}`))
	require.NoError(t, err)
	require.False(t, f.Match(map[string]any{}))
}

func TestMatchExceptAsQdrant(t *testing.T) {
	pts := append(slices.Clone(qdrantCities),
		point{"7", `{"city": "Paris", "color": ["black", "yellow"]}`},
		point{"8", `{"city": "Paris", "color": ["black", "white"]}`},
		point{"9", `{"city": "Paris", "color": null}`},
		point{"10", `{"city": "Paris", "color": []}`},
		point{"11", `{"city": "Paris"}`},
		point{"12", `{"color": [null, "black"]}`},
		point{"13", `{"color": 3}`},
		point{"14", `{"color": true}`},
		point{"15", `{"color": [null]}`},
	)
	// Qdrant's example: color is none of black, yellow. A value of
	// another type is outside the list; null, [] and a missing key are not.
	require.Equal(t, ids(1, 2, 3, 4, 5, 6, 8, 13, 14), matching(t, `{"must": {"key": "color", "match": {"except": ["black", "yellow"]}}}`, pts))
	require.Equal(t, ids(1, 2, 3, 4, 5, 6, 7, 8, 12, 14), matching(t, `{"must": {"key": "color", "match": {"except": [3]}}}`, pts))
	require.Equal(t, ids(1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14), matching(t, `{"must": {"key": "color", "match": {"except": []}}}`, pts))
}

func TestDatetimeRangeAsQdrant(t *testing.T) {
	pts := []point{
		{"1", `{"date": "2023-02-08T10:49:00Z"}`},
		{"2", `{"date": "2023-02-08T10:49:00.000001Z"}`},
		{"3", `{"date": "2023-06-01"}`},
		{"4", `{"date": "2024-01-31 10:14:31"}`},
		{"5", `{"date": "2024-01-31T11:14:31+01:00"}`}, // the same instant as 4
		{"6", `{"date": "2024-01-31T10:14:32Z"}`},
		{"7", `{"date": ["1999-01-01T00:00:00Z", "2023-12-24T18:00"]}`},
		{"8", `{"date": "not a date"}`},
		{"9", `{"date": 1700000000}`},
		{"10", `{"date": null}`},
		{"11", `{}`},
		{"12", `{"date": "2023-07-01T12:00:00.5-0230"}`},
		{"13", `{"date": "2023-07-01t12:00:00z"}`},
	}
	// Qdrant's documented example, gte and lt null.
	require.Equal(t, ids(2, 3, 4, 5, 7, 12, 13), matching(t,
		`{"must": [{"key": "date", "range": {"gt": "2023-02-08T10:49:00Z", "gte": null, "lt": null, "lte": "2024-01-31 10:14:31Z"}}]}`, pts))
	require.Equal(t, ids(1, 2, 3, 7, 12, 13), matching(t, `{"must": {"key": "date", "range": {"gte": "2023-02-08T11:49:00+01:00", "lt": "2024-01-01"}}}`, pts))
	for _, tc := range []struct {
		s    string
		want string
	}{
		{"2014-01-01T00:00:00Z", "2014-01-01T00:00:00Z"},
		{"2014-01-01 00:00:00Z", "2014-01-01T00:00:00Z"},
		{"2014-01-01T00:00:00.123456789+05:30", "2013-12-31T18:30:00.123456789Z"},
		{"2014-01-01T00:00:00-0300", "2014-01-01T03:00:00Z"},
		{"2014-01-01T00:00:00+01", "2013-12-31T23:00:00Z"},
		{"2014-01-01 00:00:00 +01:00", "2013-12-31T23:00:00Z"},
		{"2014-01-01T00:00:00", "2014-01-01T00:00:00Z"},
		{"2014-01-01 00:00", "2014-01-01T00:00:00Z"},
		{"2014-01-01", "2014-01-01T00:00:00Z"},
	} {
		got, err := ParseDatetime(tc.s)
		require.NoError(t, err, tc.s)
		require.Equal(t, tc.want, got.Format("2006-01-02T15:04:05.999999999Z07:00"), tc.s)
	}
	for _, s := range []string{"", "2014", "2014-01", "2014-13-01", "2014-01-01T00:00Z", "01/01/2014", "2014-01-01T25:00:00Z", "2014-01-01Tfoo"} {
		_, err := ParseDatetime(s)
		require.Error(t, err, s)
	}
}

func TestNestedAsQdrant(t *testing.T) {
	// Qdrant's documentation: an array of objects, where a plain
	// condition on each key would match both, and nested only the point
	// one of whose elements has both.
	pts := []point{
		{"1", `{"dinosaur": "t-rex", "diet": [{"food": "leaves", "likes": false}, {"food": "meat", "likes": true}]}`},
		{"2", `{"dinosaur": "diplodocus", "diet": [{"food": "leaves", "likes": true}, {"food": "meat", "likes": false}]}`},
		{"3", `{"diet": {"food": "meat", "likes": true}}`}, // not an array
		{"4", `{"diet": []}`},
		{"5", `{"diet": [null, 1, {"food": "meat", "likes": true, "n": [1, 2]}]}`},
		{"6", `{}`},
	}
	nested := `{"must": [{"nested": {"key": "diet", "filter": {"must": [
		{"key": "food", "match": {"value": "meat"}}, {"key": "likes", "match": {"value": true}}]}}}]}`
	require.Equal(t, ids(1, 5), matching(t, nested, pts))
	// must_not inside: some element has no meat.
	require.Equal(t, ids(1, 2), matching(t, `{"must": {"nested": {"key": "diet", "filter": {"must_not": {"key": "food", "match": {"value": "meat"}}}}}}`, pts))
	// Outside nested, must_not of it: no element likes meat.
	require.Equal(t, ids(2, 3, 4, 6), matching(t, `{"must_not": `+nested[len(`{"must": [`):len(nested)-2]+`}`, pts))
	require.Equal(t, ids(1, 2, 5), matching(t, `{"must": {"nested": {"key": "diet", "filter": {}}}}`, pts))
	require.Equal(t, ids(5), matching(t, `{"must": {"nested": {"key": "diet", "filter": {"must": {"key": "n", "values_count": {"gte": 2}}}}}}`, pts))
}

func TestMinShouldAsQdrant(t *testing.T) {
	src := `{"min_should": {"conditions": [
		{"key": "city", "match": {"value": "London"}},
		{"key": "color", "match": {"value": "red"}},
		{"key": "color", "match": {"value": "blue"}}], "min_count": 2}}`
	require.Equal(t, ids(2, 3), matching(t, src, qdrantCities))
	require.Equal(t, ids(1, 2, 3, 4, 6), matching(t, `{"min_should": {"conditions": [{"key": "city", "match": {"value": "London"}},
		{"key": "color", "match": {"any": ["red", "blue"]}}], "min_count": 1}}`, qdrantCities))
	require.Equal(t, ids(2), matching(t, `{"must": {"key": "color", "match": {"value": "red"}}, "min_should": {"conditions": [
		{"key": "city", "match": {"value": "London"}}, {"has_id": [2, 4]}], "min_count": 2}}`, qdrantCities))
	require.Equal(t, ids(), matching(t, `{"min_should": {"conditions": [{"key": "city", "match": {"value": "London"}}], "min_count": 2}}`, qdrantCities))
	require.Equal(t, ids(), matching(t, `{"min_should": {"conditions": [], "min_count": 1}}`, qdrantCities))
}

func TestMatchTextAsQdrantWithoutATextIndex(t *testing.T) {
	pts := []point{
		{"1", `{"description": "good cheap food"}`},
		{"2", `{"description": "cheap and good"}`},
		{"3", `{"description": "Good Cheap"}`},
		{"4", `{"description": ["expensive", "a good cheap one"]}`},
		{"5", `{"description": 7}`},
		{"6", `{}`},
	}
	require.Equal(t, ids(1, 4), matching(t, `{"must": {"key": "description", "match": {"text": "good cheap"}}}`, pts))
	require.Equal(t, ids(1, 4), matching(t, `{"must": {"key": "description", "match": {"phrase": "good cheap"}}}`, pts))
	require.Equal(t, ids(1, 2, 4), matching(t, `{"must": {"key": "description", "match": {"text_any": "cheap  nope"}}}`, pts))
	require.Equal(t, ids(1, 2, 3, 4), matching(t, `{"must": {"key": "description", "match": {"text": ""}}}`, pts))
	require.Equal(t, ids(), matching(t, `{"must": {"key": "description", "match": {"text_any": ""}}}`, pts))
}

func TestGeoAsQdrant(t *testing.T) {
	pts := []point{
		{"1", `{"location": {"lon": 52.5, "lat": 13.43}}`},
		{"2", `{"location": {"lon": 52.520711, "lat": 13.403683}}`},
		{"3", `{"location": [{"lon": 0, "lat": 0}, {"lon": 52.51, "lat": 13.41}]}`},
		{"4", `{"location": {"lon": "52.5", "lat": 13.43}}`},
		{"5", `{"location": {"lat": 13.43}}`},
		{"6", `{"location": null}`},
		{"7", `{}`},
		{"8", `{"location": {"lon": -30, "lat": -30}}`},   // in the polygon's hole
		{"9", `{"location": {"lon": 30, "lat": 30}}`},     // in the polygon
		{"10", `{"location": {"lon": 60, "lat": 0}}`},     // on its edge
		{"11", `{"location": {"lon": 0, "lat": -30}}`},    // on the hole's edge
		{"12", `{"location": {"lon": 179, "lat": 13.4}}`}, // across the antimeridian
	}
	// Qdrant's documented box and radius (lon and lat as its examples
	// give them).
	require.Equal(t, ids(1, 3), matching(t, `{"must": {"key": "location", "geo_bounding_box": {
		"bottom_right": {"lon": 52.520711, "lat": 13.403683}, "top_left": {"lon": 52.495862, "lat": 13.455868}}}}`, pts))
	require.Equal(t, ids(12), matching(t, `{"must": {"key": "location", "geo_bounding_box": {
		"top_left": {"lon": 170, "lat": 20}, "bottom_right": {"lon": -170, "lat": 10}}}}`, pts))
	require.Equal(t, ids(1, 2, 3), matching(t, `{"must": {"key": "location", "geo_radius": {"center": {"lon": 52.520711, "lat": 13.403683}, "radius": 4000.0}}}`, pts))
	require.Equal(t, ids(2), matching(t, `{"must": {"key": "location", "geo_radius": {"center": {"lon": 52.520711, "lat": 13.403683}, "radius": 1000.0}}}`, pts))
	got := matching(t, `{"must": {"key": "location", "geo_polygon": {
		"exterior": {"points": [{"lon": -70, "lat": -70}, {"lon": 60, "lat": -70}, {"lon": 60, "lat": 60}, {"lon": -70, "lat": 60}, {"lon": -70, "lat": -70}]},
		"interiors": [{"points": [{"lon": -65, "lat": -65}, {"lon": 0, "lat": -65}, {"lon": 0, "lat": 0}, {"lon": -65, "lat": 0}, {"lon": -65, "lat": -65}]}]}}}`, pts)
	require.Equal(t, ids(1, 2, 3, 9), got)
	// Qdrant's haversine: (0, 0) to (0.5, 0.5) is 78626.29627999048 m.
	require.InDelta(t, 78626.29627999048, Haversine(GeoPoint{0, 0}, GeoPoint{0.5, 0.5}), 1e-6)
}

func TestNewConditionsRefusedNamingTheMember(t *testing.T) {
	ring := `{"points": [{"lon": 0, "lat": 0}, {"lon": 1, "lat": 0}, {"lon": 1, "lat": 1}, {"lon": 0, "lat": 0}]}`
	for _, tc := range []struct{ in, want string }{
		{`{"must": {"has_id": 1}}`, "filter.must.has_id: is an integer, want a list of point ids"},
		{`{"must": {"has_id": [-1]}}`, "filter.must.has_id[0]: is -1, want an unsigned 64-bit integer or a UUID string"},
		{`{"must": {"has_id": [1.5]}}`, "filter.must.has_id[0]: is 1.5, want an unsigned 64-bit integer or a UUID string"},
		{`{"must": {"has_id": [""]}}`, "filter.must.has_id[0]: is empty, want a point id"},
		{`{"must": {"has_id": [1], "key": "a"}}`, "filter.must.has_id: unknown field; a keyed condition has match, range, values_count, geo_radius, geo_bounding_box or geo_polygon"},
		{`{"must": {"has_id": [1], "x": 1}}`, "filter.must.x: unexpected beside has_id"},
		{`{"must": {"nested": {"key": "a"}}}`, "filter.must.nested.filter: is missing"},
		{`{"must": {"nested": {"filter": {}}}}`, "filter.must.nested.key: is missing"},
		{`{"must": {"nested": {"key": "a[]", "filter": {}}}}`, `filter.must.nested.key: "a[]": the [] array path syntax is not supported; a nested condition tests the objects of an array`},
		{`{"must": {"key": "a[0].b", "match": {"value": 1}}}`, `filter.must.key: "a[0].b": the [] array path syntax is not supported; a nested condition tests the objects of an array`},
		{`{"must": {"nested": {"key": "a", "filter": {"must": {"has_id": [1]}}}}}`, "filter.must.nested.filter: has a has_id condition; inside nested, conditions test the array's elements, which have no ids"},
		{`{"must": {"nested": {"key": "a", "filter": {"must": {"wat": 1}}}}}`, "filter.must.nested.filter.must.wat: unknown condition; conditions are key with match, range, values_count or a geo area, is_empty, is_null, has_id, nested, or a nested filter of must, should and must_not"},
		{`{"must": {"nested": {"key": "a", "filter": {}, "x": 1}}}`, "filter.must.nested.x: unknown field; nested takes key and filter"},
		{`{"must": {"key": "d", "range": {"gt": "2020-01-01", "lt": 5}}}`, "filter.must.range.lt: is an integer, but another bound is a datetime string; a range is all numbers or all datetimes"},
		{`{"must": {"key": "d", "range": {"gt": "yesterday"}}}`, "filter.must.range.gt: is not a datetime; want RFC 3339 like 2014-01-01T00:00:00Z (or without zone, UTC)"},
		{`{"must": {"key": "d", "values_count": {"gt": "2020-01-01"}}}`, "filter.must.values_count: has a datetime bound; values_count takes numbers of values"},
		{`{"must": {"key": "d", "match": {"text": 1}}}`, "filter.must.match.text: is an integer, want a string"},
		{`{"min_should": {"conditions": [], "min_count": 0}}`, "filter.min_should.min_count: is 0, want a whole number of conditions, 1 or more"},
		{`{"min_should": {"conditions": [], "min_count": 1.5}}`, "filter.min_should.min_count: is 1.5, want a whole number of conditions, 1 or more"},
		{`{"min_should": {"conditions": []}}`, "filter.min_should.min_count: is missing"},
		{`{"min_should": {"min_count": 1}}`, "filter.min_should.conditions: is missing"},
		{`{"min_should": {"conditions": {}, "min_count": 1}}`, "filter.min_should.conditions: is an object, want a list of conditions"},
		{`{"min_should": {"conditions": [{"key": ""}], "min_count": 1}}`, "filter.min_should.conditions[0].key: is empty"},
		{`{"min_should": []}`, `filter.min_should: is an array, want {"conditions": [...], "min_count": n}`},
		{`{"must": {"key": "g", "geo_radius": {"center": {"lon": 0, "lat": 91}, "radius": 1}}}`, "filter.must.geo_radius.center.lat: is 91, want a number within [-90, 90]"},
		{`{"must": {"key": "g", "geo_radius": {"center": {"lon": 0, "lat": 0}}}}`, "filter.must.geo_radius.radius: is missing"},
		{`{"must": {"key": "g", "geo_radius": {"center": {"lon": "0", "lat": 0}, "radius": 1}}}`, "filter.must.geo_radius.center.lon: is a string, want a number of degrees"},
		{`{"must": {"key": "g", "geo_radius": {"center": {"lat": 0}, "radius": 1}}}`, "filter.must.geo_radius.center.lon: is missing"},
		{`{"must": {"key": "g", "geo_bounding_box": {"top_left": {"lon": 0, "lat": 0}}}}`, "filter.must.geo_bounding_box.bottom_right: is missing"},
		{`{"must": {"key": "g", "geo_bounding_box": {"top_left": {"lon": 0, "lat": 0, "alt": 1}, "bottom_right": {"lon": 0, "lat": 0}}}}`, "filter.must.geo_bounding_box.top_left.alt: unknown field; a geo point has lon and lat"},
		{`{"must": {"key": "g", "geo_polygon": {"exterior": {"points": []}}}}`, "filter.must.geo_polygon.exterior.points: has 0 points; a polygon ring has at least 4, the last the first"},
		{`{"must": {"key": "g", "geo_polygon": {"interiors": []}}}`, "filter.must.geo_polygon.exterior: is missing"},
		{`{"must": {"key": "g", "geo_polygon": {"exterior": ` + ring + `, "interiors": [{"points": [{"lon": 0, "lat": 0}, {"lon": 1, "lat": 0}, {"lon": 1, "lat": 1}, {"lon": 0, "lat": 1}]}]}}}`, "filter.must.geo_polygon.interiors[0].points: is not closed; its last point must be its first"},
		{`{"must": {"key": "g", "geo_polygon": {"exterior": ` + ring + `}, "geo_radius": {}}}`, "filter.must: has more than one of match, range, values_count, geo_radius, geo_bounding_box and geo_polygon; give one"},
		{`{"must": {"key": "g", "geo_radius": null}}`, "filter.must: has a null geo area"},
		{`{"must": {"key": "g", "geo_polygon": null}}`, "filter.must: has a null geo area"},
	} {
		_, err := Parse([]byte(tc.in))
		require.Error(t, err, tc.in)
		require.Equal(t, tc.want, err.Error(), tc.in)
	}
}

// TestUUIDMatchAsQdrant: on a key with a uuid payload index Qdrant parses
// both the stored strings and the match operands as UUIDs (its map index
// of u128 keys), so every way of writing one UUID matches; values that
// are no UUID strings are not in the index, so except never selects them.
// An operand that is no UUID leaves the condition to Qdrant's payload
// check: plain string equality.
func TestUUIDMatchAsQdrant(t *testing.T) {
	pts := []point{
		{"1", `{"u": "6f9619ff-8b86-d011-b42d-00cf4fc964ff"}`},
		{"2", `{"u": "6F9619FF-8B86-D011-B42D-00CF4FC964FF"}`},
		{"3", `{"u": "{6f9619ff-8b86-d011-b42d-00cf4fc964ff}"}`},
		{"4", `{"u": "urn:uuid:6f9619ff-8b86-d011-b42d-00cf4fc964ff"}`},
		{"5", `{"u": "123e4567e89b12d3a456426614174000"}`},
		{"6", `{"u": ["not-a-uuid", "123E4567-E89B-12D3-A456-426614174000"]}`},
		{"7", `{"u": "not-a-uuid"}`},
		{"8", `{"u": 7}`},
		{"9", `{"v": "6f9619ff-8b86-d011-b42d-00cf4fc964ff"}`},
		{"10", `{"u": null}`},
	}
	uuidKeys := map[string]bool{"u": true}
	for _, tc := range []struct {
		name, filter string
		want         []string
	}{
		{"value: every form", `{"must": [{"key": "u", "match": {"value": "6F9619FF8B86D011B42D00CF4FC964FF"}}]}`, ids(1, 2, 3, 4)},
		{"value in an array", `{"must": [{"key": "u", "match": {"value": "123e4567-e89b-12d3-a456-426614174000"}}]}`, ids(5, 6)},
		{"any", `{"must": [{"key": "u", "match": {"any": ["{123e4567-e89b-12d3-a456-426614174000}", "00000000-0000-0000-0000-000000000000"]}}]}`, ids(5, 6)},
		{"except: uuids only", `{"must": [{"key": "u", "match": {"except": ["6f9619ff-8b86-d011-b42d-00cf4fc964ff"]}}]}`, ids(5, 6)},
		{"except nothing: every uuid", `{"must": [{"key": "u", "match": {"except": []}}]}`, ids(1, 2, 3, 4, 5, 6)},
		{"must_not", `{"must_not": [{"key": "u", "match": {"value": "6f9619ff-8b86-d011-b42d-00cf4fc964ff"}}]}`, ids(5, 6, 7, 8, 9, 10)},
		{"an operand that is no uuid: strings as written", `{"must": [{"key": "u", "match": {"value": "not-a-uuid"}}]}`, ids(6, 7)},
		{"one operand no uuid: the list as written", `{"must": [{"key": "u", "match": {"any": ["not-a-uuid", "6f9619ff-8b86-d011-b42d-00cf4fc964ff"]}}]}`, ids(1, 6, 7)},
		{"an integer: as written", `{"must": [{"key": "u", "match": {"value": 7}}]}`, ids(8)},
		{"another key: as written", `{"must": [{"key": "v", "match": {"value": "6F9619FF-8B86-D011-B42D-00CF4FC964FF"}}]}`, ids()},
		{"nested filter", `{"should": [{"must": [{"key": "u", "match": {"value": "6f9619ff8b86d011b42d00cf4fc964ff"}}]}]}`, ids(1, 2, 3, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.filter))
			require.NoError(t, err)
			before, _ := json.Marshal(f)
			g := f.WithUUIDKeys(uuidKeys)
			after, _ := json.Marshal(f)
			require.Equal(t, string(before), string(after), "WithUUIDKeys changes a copy")
			canon, _ := json.Marshal(g)
			require.Equal(t, tc.want, matching(t, string(canon), pts), "%s", canon)
		})
	}
	_, err := Parse([]byte(`{"must": [{"key": "u", "match": {"uuid": "nope"}}]}`))
	require.ErrorContains(t, err, `must[0].match.uuid: "nope" is not a UUID`)
	_, err = Parse([]byte(`{"must": [{"key": "u", "match": {"uuid_any": [1]}}]}`))
	require.ErrorContains(t, err, "must[0].match.uuid_any[0]: is an integer, want a UUID string")
}
