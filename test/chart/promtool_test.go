package chart

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestPromtoolCheckRules(t *testing.T) {
	cmd := tool(t, "promtool", "check", "rules", filepath.Join(chartDir(t), "rules", "trawl-alerts.yaml"))
	t.Log(run(t, cmd))
}

// TestPromtoolTestRules runs the alert unit tests against the shipped file.
func TestPromtoolTestRules(t *testing.T) {
	cmd := tool(t, "promtool", "test", "rules", "trawl-alerts.test.yaml")
	cmd.Dir = "rules"
	t.Log(run(t, cmd))
}

// TestEveryAlertTested: each alert has a unit test in which it fires and one
// in which it stays silent.
func TestEveryAlertTested(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("rules", "trawl-alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			Name  string `json:"name"`
			Cases []struct {
				Alert string `json:"alertname"`
				Exp   []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, c := range tc.Cases {
			if len(c.Exp) > 0 {
				fires[c.Alert] = true
			} else {
				silent[c.Alert] = true
			}
		}
	}
	for alert := range ruleExprs(t) {
		if !fires[alert] {
			t.Errorf("%s: no unit test in which it fires", alert)
		}
		if !silent[alert] {
			t.Errorf("%s: no unit test in which it stays silent", alert)
		}
	}
}
