package api_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var scatterCounters = []string{
	"trawl_scatter_queries_total",
	"trawl_scatter_degraded_total",
	"trawl_scatter_shard_unavailable_total",
}

// counters snapshots every series of the scatter counters, keyed
// "name{label=value,...}" with labels sorted.
func (e *env) counters() map[string]float64 {
	e.t.Helper()
	out := map[string]float64{}
	mfs := e.Gather()
	for _, name := range scatterCounters {
		mf := mfs[name]
		require.NotNil(e.t, mf, "%s not registered", name)
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(ls)
			out[name+"{"+strings.Join(ls, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

// moved is what changed between two snapshots.
func moved(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out[k] = -before[k]
		}
	}
	return out
}

// queriesKey and degradedKey name the default collection's series (the
// collection-less paths'), the only collection of the test cluster.
func queriesKey(path string) string {
	return "trawl_scatter_queries_total{collection=trawl,path=" + path + "}"
}
func degradedKey(path string) string {
	return "trawl_scatter_degraded_total{collection=trawl,path=" + path + "}"
}
func unavailableKey(path, shard, reason string) string {
	return "trawl_scatter_shard_unavailable_total{path=" + path + ",reason=" + reason + ",shard=" + shard + "}"
}

func TestScatterCounters(t *testing.T) {
	e := newEnv(t, envConfig{})
	paths := []string{"search", "search_batch", "scroll", "count"}
	reasons := []string{"deadline_exceeded", "unavailable", "suspect", "overloaded", "not_serving", "internal"}

	// Every labelled series exists at 0 before any query.
	c0 := e.counters()
	want := map[string]float64{}
	for _, p := range paths {
		want[queriesKey(p)] = 0
		want[degradedKey(p)] = 0
		for _, s := range e.dc.Names {
			for _, r := range reasons {
				want[unavailableKey(p, s, r)] = 0
			}
		}
	}
	require.Equal(t, want, c0)

	search := func(body string) response {
		return e.do(http.MethodPost, "/v1/search?deadline_ms=1000", body, nil)
	}
	batch := func(body string) response {
		return e.do(http.MethodPost, "/v1/search/batch?deadline_ms=1000", body, nil)
	}
	q := `{"vector": ` + good8 + `}`
	// The like_id lives on shard-1, which stays up throughout.
	like := ""
	for _, r := range e.dc.Corpus {
		if e.homeOf(r.ID) == "shard-1" {
			like = r.ID
			break
		}
	}
	qs := `{"queries": [` + q + `,` + q + `,{"like_id": "` + like + `"},` + q + `,` + q + `]}`

	steps := []struct {
		name   string
		before func()
		send   func() response
		status int
		moved  map[string]float64
	}{
		{name: "healthy search", send: func() response { return search(q) }, status: 200,
			moved: map[string]float64{queriesKey("search"): 1}},
		{name: "healthy batch of 5 counts once", send: func() response { return batch(qs) }, status: 200,
			moved: map[string]float64{queriesKey("search_batch"): 1}},
		{name: "bad search counts nothing", send: func() response { return search(`{"k": 0}`) }, status: 400,
			moved: map[string]float64{}},
		{name: "one shard down", before: func() { e.StopShard("shard-2") },
			send: func() response { return search(q) }, status: 200,
			moved: map[string]float64{queriesKey("search"): 1, degradedKey("search"): 1,
				unavailableKey("search", "shard-2", "unavailable"): 1}},
		{name: "one shard down, allow_partial false: 503 counts the same",
			send:   func() response { return search(`{"vector": ` + good8 + `, "allow_partial": false}`) },
			status: 503,
			moved: map[string]float64{queriesKey("search"): 1, degradedKey("search"): 1,
				unavailableKey("search", "shard-2", "unavailable"): 1}},
		{name: "one shard down, batch", send: func() response { return batch(qs) }, status: 200,
			moved: map[string]float64{queriesKey("search_batch"): 1, degradedKey("search_batch"): 1,
				unavailableKey("search_batch", "shard-2", "unavailable"): 1}},
		{name: "two shards down", before: func() { e.StopShard("shard-0") },
			send: func() response { return search(q) }, status: 200,
			moved: map[string]float64{queriesKey("search"): 1, degradedKey("search"): 1,
				unavailableKey("search", "shard-0", "unavailable"): 1,
				unavailableKey("search", "shard-2", "unavailable"): 1}},
		{name: "two shards down, batch", send: func() response { return batch(qs) }, status: 200,
			moved: map[string]float64{queriesKey("search_batch"): 1, degradedKey("search_batch"): 1,
				unavailableKey("search_batch", "shard-0", "unavailable"): 1,
				unavailableKey("search_batch", "shard-2", "unavailable"): 1}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before()
			}
			before := e.counters()
			res := s.send()
			require.Equal(t, s.status, res.status, "%s", res.body)
			if s.status != 400 {
				require.Equal(t, map[bool]string{true: "true", false: "false"}[len(s.moved) > 1],
					res.header.Get("X-Trawl-Degraded"))
			}
			require.Equal(t, s.moved, moved(before, e.counters()))
		})
	}
}
