package app_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

// collectionSeries is every series of the router's metrics labelled by
// collection, "name{label=value,...}" (labels sorted) → value (a
// histogram's: its sample count).
func collectionSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "trawl_scatter_queries_total", "trawl_scatter_degraded_total", "trawl_scatter_duration_seconds", "trawl_collection_documents":
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(ls)
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue() +
				float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

// TestMetricsFollowTheCatalog: by the time the router is ready, every
// collection of the catalog (the dev cluster's trawl and one
// --ensure-collection created) has its series, at zero, and its documents;
// a fan-out moves exactly its collection's and path's series by one; a
// dropped collection's series are gone after the next catalog reading.
func TestMetricsFollowTheCatalog(t *testing.T) {
	const docs = 90
	h := startWith(t, devcluster.Config{Dim: 8, Docs: docs, Seed: 4, Kernel: vector.Generic()}, app.Config{
		EnsureCollections: []catalog.Spec{{Name: "notes", Settings: catalog.Settings{Dim: 4, Metric: vector.DotProduct}.Normalize()}},
	})
	paths := []string{"search", "search_batch", "scroll", "count"}
	want := map[string]float64{"trawl_collection_documents{collection=trawl}": docs, "trawl_collection_documents{collection=notes}": 0}
	for _, c := range []string{"notes", "trawl"} {
		for _, p := range paths {
			for _, n := range []string{"trawl_scatter_queries_total", "trawl_scatter_degraded_total", "trawl_scatter_duration_seconds"} {
				want[n+"{collection="+c+",path="+p+"}"] = 0
			}
		}
	}
	require.Equal(t, want, collectionSeries(t, h.r.Registry), "every collection's series at ready")

	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(h.srv.URL+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	post("/v1/collections/notes/search?deadline_ms=2000", `{"vector": [1, 2, 3, 4], "k": 3}`)
	want["trawl_scatter_queries_total{collection=notes,path=search}"] = 1
	want["trawl_scatter_duration_seconds{collection=notes,path=search}"] = 1
	require.Equal(t, want, collectionSeries(t, h.r.Registry), "one fan-out on notes")

	post("/v1/search?deadline_ms=2000", `{"like_id": "doc-3", "k": 3}`)
	want["trawl_scatter_queries_total{collection=trawl,path=search}"] = 1
	want["trawl_scatter_duration_seconds{collection=trawl,path=search}"] = 1
	require.Equal(t, want, collectionSeries(t, h.r.Registry), "one fan-out on the default collection")

	req, err := http.NewRequest(http.MethodDelete, h.srv.URL+"/v1/collections/notes", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.r.Coordinator.SurveyCollections(ctx)) // what the 5 s catalog refresh does
	for k := range want {
		if strings.Contains(k, "collection=notes") {
			delete(want, k)
		}
	}
	require.Equal(t, want, collectionSeries(t, h.r.Registry), "notes dropped: its series are gone")
}
