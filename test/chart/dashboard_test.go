package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDashboard: the degraded ratio is the first thing a reader sees, and the
// JSON is what current Grafana loads.
func TestDashboard(t *testing.T) {
	panels, dash := dashboardExprs(t)
	if v, _ := dash["schemaVersion"].(float64); v < 39 {
		t.Errorf("schemaVersion %v; current Grafana writes 39 or later", dash["schemaVersion"])
	}
	if dash["uid"] == "" || dash["title"] == "" {
		t.Error("dashboard needs a uid and a title")
	}
	list := dash["panels"].([]any)
	first := list[0].(map[string]any)
	pos := first["gridPos"].(map[string]any)
	if !strings.Contains(first["title"].(string), "Degraded") || pos["x"].(float64) != 0 || pos["y"].(float64) != 0 {
		t.Errorf("first panel %q at %v; the degraded ratio must come first, top left", first["title"], pos)
	}
	if expr := panels[first["title"].(string)][0]; !strings.Contains(expr, "trawl_scatter_degraded_total") || !strings.Contains(expr, "trawl_scatter_queries_total") {
		t.Errorf("first panel does not plot the degraded ratio: %s", expr)
	}
	// Nothing sits above or left of it in reading order.
	for _, p := range list[1:] {
		g := p.(map[string]any)["gridPos"].(map[string]any)
		if g["y"].(float64) < 0 || (g["y"].(float64) == 0 && g["x"].(float64) == 0) {
			t.Errorf("panel %q overlaps the degraded ratio", p.(map[string]any)["title"])
		}
	}
	ids := map[float64]bool{}
	for _, p := range list {
		panel := p.(map[string]any)
		id := panel["id"].(float64)
		if ids[id] {
			t.Errorf("panel id %v twice", id)
		}
		ids[id] = true
		ds, _ := panel["datasource"].(map[string]any)
		if ds["uid"] != "${datasource}" {
			t.Errorf("panel %q: datasource %v, want the ${datasource} variable", panel["title"], ds)
		}
		if len(panels[panel["title"].(string)]) == 0 {
			t.Errorf("panel %q has no query", panel["title"])
		}
	}
	// The panels, by the metric each must plot.
	want := []string{
		"trawl_scatter_shard_unavailable_total",       // unavailable shards by reason
		"trawl_scatter_duration_seconds_bucket",       // query latency percentiles
		"trawl_shard_request_duration_seconds_bucket", // per-shard RPC latency
		"trawl_scatter_hedges_total",
		"trawl_scatter_failovers_total",
		"trawl_replica_suspect",
		"trawl_scatter_coverage_ratio",
		"trawl_admission_rejected_total", // refused queries by reason
		"trawl_admission_limit",          // the learned concurrency limit
		"trawl_collection_documents",     // documents by collection
	}
	all := ""
	for _, exprs := range panels {
		all += strings.Join(exprs, "\n")
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no panel plots %s", w)
		}
	}
}

// TestDashboardCollectionVariable: a `collection` variable lists the
// collections the routers report, and every panel on the per-collection
// series (fan-outs, degraded fan-outs, latency, documents) is filtered by it.
func TestDashboardCollectionVariable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "dashboards", "trawl.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
				IncludeAll bool   `json:"includeAll"`
				Multi      bool   `json:"multi"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range dash.Templating.List {
		if v.Name != "collection" {
			continue
		}
		found = true
		if !strings.HasPrefix(v.Definition, "label_values(trawl_scatter_queries_total") || !strings.HasSuffix(v.Definition, ", collection)") {
			t.Errorf("collection variable: %q, want label_values of trawl_scatter_queries_total's collection", v.Definition)
		}
		if !v.IncludeAll || !v.Multi {
			t.Error("collection variable: want All and several at once")
		}
	}
	if !found {
		t.Fatal("no collection variable")
	}
	byCollection := []string{"trawl_scatter_queries_total", "trawl_scatter_degraded_total", "trawl_scatter_duration_seconds_bucket", "trawl_collection_documents"}
	panels := 0
	for _, p := range dash.Panels {
		uses := false
		for _, tg := range p.Targets {
			for _, n := range metricNames(t, "panel "+p.Title, strings.NewReplacer("$__rate_interval", "5m").Replace(tg.Expr)) {
				if slices.Contains(byCollection, n) {
					uses = true
					if !strings.Contains(tg.Expr, n+`{namespace=~"$namespace",collection=~"$collection"}`) {
						t.Errorf("panel %q: %s not filtered by the collection variable: %s", p.Title, n, tg.Expr)
					}
				}
			}
		}
		if uses {
			panels++
		}
	}
	if panels < 4 {
		t.Errorf("%d panels plot the per-collection series; want the degraded ratio, its stat, latency, fan-outs and documents", panels)
	}
}
