package qdrant_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// TestQdrantUUIDIndexAndKeywordArrays: a uuid payload index makes match
// value, any and except on its key compare UUIDs however each is written,
// as Qdrant's uuid index does, on every read and on edits and deletes by
// filter; without the declaration, or with an operand that is no UUID,
// strings match as written. A keyword key holding arrays of strings
// matches a point when any element matches. Facet on a uuid key is
// refused, naming the key.
func TestQdrantUUIDIndexAndKeywordArrays(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	const u1 = "6f9619ff-8b86-d011-b42d-00cf4fc964ff"
	res := e.Do(http.MethodPut, "/collections/trawl/points?wait=true", `{"points": [
		{"id": 21, "vector": `+unit(0)+`, "payload": {"suite": "uuid", "owner": "`+u1+`", "tags": ["a", "b"]}},
		{"id": 22, "vector": `+unit(1)+`, "payload": {"suite": "uuid", "owner": "`+strings.ToUpper(u1)+`", "tags": ["b", "c"]}},
		{"id": 23, "vector": `+unit(2)+`, "payload": {"suite": "uuid", "owner": "{`+u1+`}", "tags": "a"}},
		{"id": 24, "vector": `+unit(3)+`, "payload": {"suite": "uuid", "owner": ["nobody", "123e4567-e89b-12d3-a456-426614174000"], "tags": []}},
		{"id": 25, "vector": `+unit(4)+`, "payload": {"suite": "uuid", "owner": "nobody"}}]}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	suite := `{"key": "suite", "match": {"value": "uuid"}}`
	scroll := func(t *testing.T, cond string) string {
		t.Helper()
		body := `{"filter": {"must": [` + suite + `, ` + cond + `]}, "limit": 10, "with_payload": false}`
		res := e.Do(http.MethodPost, "/collections/trawl/points/scroll?deadline_ms=2000", body, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var ids []string
		for _, m := range regexpID.FindAllStringSubmatch(string(res.Body), -1) {
			ids = append(ids, m[1])
		}
		return strings.Join(ids, ",")
	}
	count := func(t *testing.T, cond string) string {
		t.Helper()
		res := e.Do(http.MethodPost, "/collections/trawl/points/count?deadline_ms=2000", `{"filter": {"must": [`+suite+`, `+cond+`]}}`, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		return apitest.CompactJSON(t, res.Body)
	}
	byValue := `{"key": "owner", "match": {"value": "` + strings.ReplaceAll(u1, "-", "") + `"}}`

	t.Run("keyword arrays", func(t *testing.T) {
		res := e.Do(http.MethodPut, "/collections/trawl/index?wait=true", `{"field_name": "tags", "field_schema": "keyword"}`, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "21,23", scroll(t, `{"key": "tags", "match": {"value": "a"}}`))
		require.Equal(t, "21,22", scroll(t, `{"key": "tags", "match": {"value": "b"}}`))
		require.Equal(t, "21,22,23", scroll(t, `{"key": "tags", "match": {"any": ["c", "a"]}}`), "any element")
		require.Equal(t, "21,22", scroll(t, `{"key": "tags", "match": {"except": ["a"]}}`), "some element outside the list")
	})
	require.Equal(t, "", scroll(t, byValue), "before the declaration: strings as written")
	res = e.Do(http.MethodPut, "/collections/trawl/index?wait=true", `{"field_name": "owner", "field_schema": "uuid"}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	for _, tc := range []struct{ name, cond, want string }{
		{"value, every form", byValue, "21,22,23"},
		{"any, in an array", `{"key": "owner", "match": {"any": ["123E4567E89B12D3A456426614174000"]}}`, "24"},
		{"except: UUID values only", `{"key": "owner", "match": {"except": ["` + strings.ToUpper(u1) + `"]}}`, "24"},
		{"an operand that is no UUID: as written", `{"key": "owner", "match": {"value": "nobody"}}`, "24,25"},
		{"must_not", `{"must_not": [` + byValue + `]}`, "24,25"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, scroll(t, tc.cond)) })
	}
	require.Contains(t, count(t, byValue), `{"result":{"count":3},`)
	res = e.Do(http.MethodPost, "/collections/trawl/points/search?deadline_ms=2000", `{"vector": `+unit(0)+`, "limit": 10, "filter": {"must": [`+suite+`, `+byValue+`]}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Len(t, regexpID.FindAllStringSubmatch(string(res.Body), -1), 3, "%s", res.Body)

	// Edits and deletes by filter are evaluated on every replica alike.
	res = e.Do(http.MethodPost, "/collections/trawl/points/payload?wait=true", `{"payload": {"flag": true}, "filter": {"must": [`+suite+`, `+byValue+`]}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "21,22,23", scroll(t, `{"key": "flag", "match": {"value": true}}`))
	res = e.Do(http.MethodPost, "/collections/trawl/facet", `{"key": "owner"}`, nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "facet on `owner` is not supported: it has a uuid index")
	res = e.Do(http.MethodPost, "/collections/trawl/points/delete?wait=true", `{"filter": {"must": [`+suite+`, `+byValue+`]}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "24,25", scroll(t, `{"is_empty": {"key": "nope"}}`))
	e.EventuallyAbsent("21", "22", "23")
}
