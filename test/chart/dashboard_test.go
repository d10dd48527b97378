package chart

import (
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
