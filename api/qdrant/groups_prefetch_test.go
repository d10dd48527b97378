package qdrant_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// bGroup is a brute-force group: its value and hits, best first.
type bGroup struct {
	value string
	hits  []bHit
}

// bruteGroups groups a ranked list by the cities of its points, as
// query/groups with prefetch does: walking the ranking, a point joins the
// group of each distinct city it holds, the first limit groups met are
// the answer, each with its first size points.
func bruteGroups(ranked []bHit, pts []rdPoint, limit, size int) []bGroup {
	var out []bGroup
	for _, h := range ranked {
		var cities []string
		switch c := pts[h.id-1].payload["city"].(type) {
		case string:
			cities = []string{c}
		case []any:
			for _, e := range c {
				if s, ok := e.(string); ok && !slices.Contains(cities, s) {
					cities = append(cities, s)
				}
			}
		}
		for _, c := range cities {
			i := slices.IndexFunc(out, func(g bGroup) bool { return g.value == c })
			if i < 0 {
				if len(out) == limit {
					continue
				}
				i, out = len(out), append(out, bGroup{value: c})
			}
			if len(out[i].hits) < size {
				out[i].hits = append(out[i].hits, h)
			}
		}
	}
	return out
}

// TestQdrantQueryGroupsOverPrefetch: query/groups with prefetch groups
// the tree's answer (random trees of fusions and re-scorings with
// filters and thresholds, on Dot and Euclid collections over 3 shards)
// as a brute force over the whole tree ranks it; hits carry the payload
// asked for, not the group key the grouping read.
func TestQdrantQueryGroupsOverPrefetch(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	pts := rdCorpus(300)
	for _, coll := range []struct {
		name, distance string
		l2             bool
	}{{"gd", "Dot", false}, {"ge", "Euclid", true}} {
		t.Run(coll.distance, func(t *testing.T) {
			res := e.Do(http.MethodPut, "/collections/"+coll.name, `{"vectors": {"size": 8, "distance": "`+coll.distance+`"}}`, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			res = e.Do(http.MethodPut, "/collections/"+coll.name+"/points?wait=true", rdUpsert(t, pts), nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			rng := rand.New(rand.NewPCG(5, 9))
			nonEmpty := 0
			for i := range 40 {
				tree := randTree(rng, 1+rng.IntN(2), true, coll.l2)
				limit, size := 1+rng.IntN(5), 1+rng.IntN(4)
				want := bruteGroups(brute(tree, pts, nil, 1000, coll.l2), pts, limit, size)
				body := tree.body(true, 0, "")
				body["group_by"], body["limit"], body["group_size"] = "city", limit, size
				body["with_payload"] = []string{"flag"}
				raw, err := json.Marshal(body)
				require.NoError(t, err)
				res := e.Do(http.MethodPost, "/collections/"+coll.name+"/points/query/groups?deadline_ms=5000", string(raw), nil)
				require.Equal(t, http.StatusOK, res.Status, "%s: %s", raw, res.Body)
				require.Equal(t, "false", res.Header.Get("X-Trawl-Degraded"))
				var got struct {
					Result struct {
						Groups []struct {
							ID   string `json:"id"`
							Hits []struct {
								ID      int            `json:"id"`
								Score   float64        `json:"score"`
								Payload map[string]any `json:"payload"`
							} `json:"hits"`
						} `json:"groups"`
					} `json:"result"`
				}
				require.NoError(t, json.Unmarshal(res.Body, &got), "%s", res.Body)
				what := fmt.Sprintf("tree %d: %s", i, raw)
				require.Len(t, got.Result.Groups, len(want), "%s: %s", what, res.Body)
				for gi, g := range got.Result.Groups {
					require.Equal(t, want[gi].value, g.ID, "%s: group %d", what, gi)
					require.Len(t, g.Hits, len(want[gi].hits), "%s: group %d", what, gi)
					for hi, h := range g.Hits {
						require.Equal(t, want[gi].hits[hi].id, h.ID, "%s: group %d hit %d", what, gi, hi)
						require.InDelta(t, want[gi].hits[hi].score, h.Score, 1e-4, "%s: group %d hit %d", what, gi, hi)
						_, hasCity := h.Payload["city"]
						require.False(t, hasCity, "%s: the group key was not asked for", what)
						if f, ok := pts[h.ID-1].payload["flag"]; ok {
							require.Equal(t, f, h.Payload["flag"], what)
						}
					}
				}
				if len(want) > 0 {
					nonEmpty++
				}
			}
			require.Greater(t, nonEmpty, 20, "most trees have groups: the property is not vacuous")
		})
	}
}
