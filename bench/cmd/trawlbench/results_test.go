package main

import (
	"os"
	"testing"
	"time"

	"github.com/trawl-search/trawl/bench/internal/loadgen"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// summary is a run with every answer complete at latency d.
func summary(n int, d time.Duration) loadgen.Summary {
	tl := loadgen.NewTally()
	for range n {
		tl.Add(loadgen.Complete, 200, d)
	}
	return tl.Summarise("test", time.Second)
}

func TestRatioIsMedianOfPerRoundRatios(t *testing.T) {
	// Round by round the trawl run is 2×, 2×, 10× the baseline: the
	// median of the per-round ratios is 2, not the ratio of the medians.
	a := []loadgen.Summary{summary(20, time.Millisecond), summary(40, time.Millisecond), summary(100, time.Millisecond)}
	b := []loadgen.Summary{summary(10, time.Millisecond), summary(20, time.Millisecond), summary(10, time.Millisecond)}
	if got := ratio(a, b, goodput); got != 2 {
		t.Fatalf("ratio %v, want 2", got)
	}
	if got := med(a, goodput); got != 40 {
		t.Fatalf("median goodput %v, want 40", got)
	}
}

// indexTimes reports the last of each index event a shard logged, with
// slog's nanosecond durations as durations.
func TestIndexTimes(t *testing.T) {
	path := t.TempDir() + "/shard.log"
	log := `{"msg":"ivf centroids trained and committed","took":1000000000}
not json
{"msg":"ivf centroids trained and committed","took":2375000000}
{"msg":"ivf index built","rows":18534,"took":1340000000}
{"msg":"ivf default nprobe trained and committed","nprobe_k10":27,"sample_recall_k10":0.9934,"nprobe_k100":128,"sample_recall_k100":1,"took":4984000000}
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	want := " — last training 2.375s, its build 1.34s (18534 rows), nprobe measured in 4.984s " +
		"(k ≤ 10: nprobe 27, sample recall 0.993; k ≤ 100: nprobe 128, sample recall 1.000)"
	if got := indexTimes(path); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := indexTimes(t.TempDir() + "/none.log"); got != "" {
		t.Fatalf("no log: %q", got)
	}
}

func TestRelLinkFromOutputDir(t *testing.T) {
	for _, c := range []struct{ dir, want string }{
		{".", "KERNELS.md"},
		{"out", "../KERNELS.md"},
		{"out/deeper", "../../KERNELS.md"},
	} {
		if got := relLink(c.dir, kernelsReport); got != c.want {
			t.Errorf("relLink(%q) = %q, want %q", c.dir, got, c.want)
		}
	}
}
