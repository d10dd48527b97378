package alerts

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// chartRules is the chart's shipped rule file, the one the live test runs.
func chartRules(t testing.TB) string {
	t.Helper()
	return filepath.Join("..", "..", "helm", "trawl", "rules", "trawl-alerts.yaml")
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func decode(t *testing.T, b []byte) ruleFile {
	t.Helper()
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRewriteChangesOnlyDurations: the rewritten chart rules are the same
// rules, with the same labels and annotations, whose expressions differ only
// in their range windows; putting the original windows back gives the
// original expression, node for node.
func TestRewriteChangesOnlyDurations(t *testing.T) {
	src, err := os.ReadFile(chartRules(t))
	if err != nil {
		t.Fatal(err)
	}
	rw, err := Rewrite(src, 30)
	if err != nil {
		t.Fatal(err)
	}
	before, after := decode(t, src), decode(t, rw.YAML)
	if len(before.Groups) != len(after.Groups) {
		t.Fatalf("groups: %d became %d", len(before.Groups), len(after.Groups))
	}
	wantFor := map[string]string{"15m": "30s", "10m": "20s", "5m": "10s"}
	p := parser.NewParser(parser.Options{})
	rules := 0
	for i, g := range before.Groups {
		ag := after.Groups[i]
		if g.Name != ag.Name || len(g.Rules) != len(ag.Rules) {
			t.Fatalf("group %s changed shape", g.Name)
		}
		for j, r := range g.Rules {
			a := ag.Rules[j]
			rules++
			if r.Alert != a.Alert || !maps.Equal(r.Labels, a.Labels) || !maps.Equal(r.Annotations, a.Annotations) {
				t.Errorf("%s: name, labels or annotations changed", r.Alert)
			}
			if want, ok := wantFor[r.For]; !ok || a.For != want {
				t.Errorf("%s: for %q became %q", r.Alert, r.For, a.For)
			}
			orig, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			back, err := p.ParseExpr(strings.ReplaceAll(a.Expr, "[10s]", "[5m]"))
			if err != nil {
				t.Fatal(err)
			}
			if orig.String() != back.String() {
				t.Errorf("%s: expression changed beyond its windows:\n%s\n%s", r.Alert, orig, back)
			}
			if strings.Contains(r.Expr, "[5m]") != strings.Contains(a.Expr, "[10s]") || strings.Contains(a.Expr, "[5m]") {
				t.Errorf("%s: windows not rewritten: %s", r.Alert, a.Expr)
			}
		}
	}
	if rules < 7 {
		t.Errorf("only %d rules", rules)
	}
	if rw.Longest.String() != "30s" || rw.Window.String() != "10s" {
		t.Errorf("longest for %s, window %s", rw.Longest, rw.Window)
	}
	if _, errs := rulefmt.Parse(rw.YAML, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler)); len(errs) > 0 {
		t.Errorf("rewritten file invalid: %v", errs)
	}
}

func TestRewriteRefusesWhatItCannotScale(t *testing.T) {
	for _, expr := range []string{
		`rate(x[5m] offset 1m)`,
		`rate(x[5m] @ 100)`,
		`rate(x[7s])`, // 7s/30 is under a second
	} {
		src := "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: " + expr + "\n"
		if _, err := Rewrite([]byte(src), 30); err == nil {
			t.Errorf("%s: rewritten without complaint", expr)
		}
	}
	src := "groups:\n- name: g\n  interval: 1m\n  rules:\n  - alert: A\n    expr: max_over_time(rate(x[1m])[30m:1m]) > 0\n    for: 1h\n    keep_firing_for: 2m\n"
	rw, err := Rewrite([]byte(src), 60)
	if err != nil {
		t.Fatal(err)
	}
	f := string(rw.YAML)
	for _, want := range []string{"interval: 1s", "for: 1m", "keep_firing_for: 2s", "rate(x[1s])[30s:1s]"} {
		if !strings.Contains(f, want) {
			t.Errorf("want %q in\n%s", want, f)
		}
	}
}
