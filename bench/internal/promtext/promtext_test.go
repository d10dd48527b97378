package promtext

import (
	"math"
	"reflect"
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

func TestSamplesKeepLabels(t *testing.T) {
	page := `# TYPE trawl_shard_request_duration_seconds histogram
trawl_shard_request_duration_seconds_bucket{outcome="ok",replica="127.0.0.1:1",shard="shard-0",le="1"} 5
trawl_shard_request_duration_seconds_count{outcome="ok",replica="127.0.0.1:1",shard="shard-0"} 5
trawl_shard_request_duration_seconds_count{outcome="Unavailable",replica="a \"b\", c}",shard="shard-1"} 2
trawl_shard_request_duration_seconds_count_other 9
`
	got, err := Samples(strings.NewReader(page), "trawl_shard_request_duration_seconds_count")
	if err != nil {
		t.Fatal(err)
	}
	want := []Sample{
		{Labels: map[string]string{"outcome": "ok", "replica": "127.0.0.1:1", "shard": "shard-0"}, Value: 5},
		{Labels: map[string]string{"outcome": "Unavailable", "replica": `a "b", c}`, "shard": "shard-1"}, Value: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("samples %+v, want %+v", got, want)
	}
	if _, err := Samples(strings.NewReader("m{a=\"1} 3\n"), "m"); err == nil {
		t.Fatal("unterminated label value accepted")
	}
}

func TestQuantileOfTheDelta(t *testing.T) {
	bucket := func(le string, v float64) Sample { return Sample{Labels: map[string]string{"le": le}, Value: v} }
	before := []Sample{bucket("0.001", 10), bucket("0.01", 10), bucket("0.1", 10), bucket("+Inf", 10)}
	// 100 observations in between: 50 under 1 ms, 40 in 1-10 ms, 9 in
	// 10-100 ms, 1 above.
	after := []Sample{bucket("0.001", 60), bucket("0.01", 100), bucket("0.1", 109), bucket("+Inf", 110)}
	for _, c := range []struct {
		q, want float64
	}{{0.5, 0.001}, {0.7, 0.001 + 0.009*20/40}, {0.99, 0.1}, {0.999, 0.1}} {
		got, ok := Quantile(before, after, c.q)
		if !ok || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("q %v: %v, %v; want %v", c.q, got, ok, c.want)
		}
	}
	if _, ok := Quantile(before, before, 0.99); ok {
		t.Error("a quantile of nothing observed")
	}
}
