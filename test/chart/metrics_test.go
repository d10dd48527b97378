package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/metrics"
)

// synthetic are series Prometheus makes itself rather than scraping.
var synthetic = map[string]bool{"up": true}

// exported lists every series name a running router or shard exports, from
// the product's own metrics package registered on fresh registries.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	add := func(reg *prometheus.Registry) {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					names[f.GetName()+suffix] = true
				}
			case dto.MetricType_SUMMARY:
				names[f.GetName()] = true
				names[f.GetName()+"_sum"] = true
				names[f.GetName()+"_count"] = true
			default:
				names[f.GetName()] = true
			}
		}
	}
	router := prometheus.NewRegistry()
	m := metrics.NewRouter(router, []metrics.Shard{{Name: "shard-0", Replicas: []string{"a:7070", "b:7070"}}}, "generic")
	// Vec collectors with no series yet are not gathered: touch every one.
	m.ObserveCollections(map[string]uint64{"trawl": 0})
	m.Fanout(fanout.PathSearch, "trawl", 0, 1, map[string]fanout.Reason{"shard-0": fanout.ReasonSuspect})
	m.ShardRPC("shard-0", "a:7070", "ok", 0)
	m.HTTPRequest("/v1/search", 200)
	m.Rejected(admission.ReasonLimit)
	metrics.AdmissionLimit(router, func() int { return 8 })
	b := metrics.NewBackups(router)
	b.Seen("trawl", time.Unix(1, 0))
	metrics.MaxAge(router, time.Hour)
	add(router)
	shard := prometheus.NewRegistry()
	s := metrics.NewShardServer(shard, "generic")
	s.Scan("ok", 0)
	add(shard)
	return names
}

// metricNames returns the metric names a PromQL expression selects.
func metricNames(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Fatalf("%s: %v\n%s", where, err, expr)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("%s: selector %s names no metric", where, vs)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: expression selects no metric: %s", where, expr)
	}
	return names
}

// ruleExprs returns alert name -> expression from the shipped rules file.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "rules", "trawl-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if !strings.HasPrefix(r.Alert, "Trawl") || strings.ContainsAny(r.Alert, "_- ") {
				t.Errorf("alert %q: want a CamelCase name starting with Trawl", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if r.For == "" {
				t.Errorf("%s: no `for`: a single blip would page", r.Alert)
			}
			checkRunbookAnchor(t, r.Alert, r.Annotations["runbook_url"])
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// checkRunbookAnchor: the runbook_url names a section docs/runbook.md has.
func checkRunbookAnchor(t *testing.T, alert, url string) {
	t.Helper()
	const prefix = "https://github.com/trawl-search/trawl/blob/main/docs/runbook.md#"
	anchor, ok := strings.CutPrefix(url, prefix)
	if !ok {
		t.Errorf("%s: runbook_url %q is not a section of docs/runbook.md", alert, url)
		return
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok && strings.ToLower(strings.TrimSpace(h)) == anchor {
			return
		}
	}
	t.Errorf("%s: docs/runbook.md has no section %q", alert, anchor)
}

// dashboardExprs returns panel title -> expressions, with Grafana's variables
// replaced by values PromQL can parse.
func dashboardExprs(t *testing.T) (map[string][]string, map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "dashboards", "trawl.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "${namespace}", ".*", "$collection", ".*", "${collection}", ".*")
	out := map[string][]string{}
	for _, p := range dash["panels"].([]any) {
		panel := p.(map[string]any)
		title := panel["title"].(string)
		for _, tg := range panel["targets"].([]any) {
			out[title] = append(out[title], vars.Replace(tg.(map[string]any)["expr"].(string)))
		}
	}
	return out, dash
}

// TestMetricNamesExported: every metric the alerts and the dashboard query is
// one the router or a shard exports, so a renamed metric cannot silence them.
func TestMetricNamesExported(t *testing.T) {
	have := exported(t)
	used := map[string][]string{}
	for alert, expr := range ruleExprs(t) {
		for _, n := range metricNames(t, "alert "+alert, expr) {
			used[n] = append(used[n], "alert "+alert)
		}
	}
	panels, _ := dashboardExprs(t)
	for title, exprs := range panels {
		for _, expr := range exprs {
			for _, n := range metricNames(t, "panel "+title, expr) {
				used[n] = append(used[n], "panel "+title)
			}
		}
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !have[n] && !synthetic[n] {
			t.Errorf("%s is used by %v but no router or shard exports it", n, used[n])
		}
	}
	// The signals the issue asks for are all there.
	for _, n := range []string{"trawl_scatter_degraded_total", "trawl_scatter_queries_total", "trawl_scatter_shard_unavailable_total", "trawl_replica_suspect",
		"trawl_admission_rejected_total", "trawl_admission_limit", "trawl_collection_documents"} {
		if len(used[n]) == 0 {
			t.Errorf("%s is used by no alert or panel", n)
		}
	}
}
