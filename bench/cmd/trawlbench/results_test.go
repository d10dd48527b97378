package main

import (
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
