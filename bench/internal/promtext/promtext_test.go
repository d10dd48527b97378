package promtext

import (
	"strings"
	"testing"
)

func TestParseSumsLabelSets(t *testing.T) {
	page := `# HELP trawl_scatter_hedges_total Hedged reads.
# TYPE trawl_scatter_hedges_total counter
trawl_scatter_hedges_total{outcome="won",shard="shard-0"} 3
trawl_scatter_hedges_total{outcome="lost",shard="a } b"} 4 1700000000000
trawl_admission_rejected_total 2.5
`
	m, err := Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if m["trawl_scatter_hedges_total"] != 7 || m["trawl_admission_rejected_total"] != 2.5 {
		t.Fatalf("parsed %v", m)
	}
	d := Delta(map[string]float64{"a": 1}, map[string]float64{"a": 4, "b": 2}, "a", "b", "c")
	if len(d) != 2 || d["a"] != 3 || d["b"] != 2 {
		t.Fatalf("delta %v", d)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("x{a=\"1\" 3\n")); err == nil {
		t.Fatal("unterminated label set accepted")
	}
}
