package loadgen

import (
	"net/http"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	deg := http.Header{"X-Trawl-Degraded": []string{"true"}}
	cases := []struct {
		code int
		hdr  http.Header
		err  bool
		want Outcome
	}{
		{200, http.Header{}, false, Complete},
		{200, deg, false, Degraded},
		{503, deg, false, Degraded},
		{503, http.Header{}, false, Degraded},
		{429, http.Header{}, false, Refused},
		{400, http.Header{}, false, Failed},
		{0, nil, true, Failed},
	}
	for _, c := range cases {
		if got := Classify(c.code, c.hdr, c.err); got != c.want {
			t.Errorf("Classify(%d, %v, %v) = %d, want %d", c.code, c.hdr, c.err, got, c.want)
		}
	}
}

func TestTallyPercentiles(t *testing.T) {
	a, b := NewTally(), NewTally()
	// 1..1000 ms, split over two tallies as two closed-loop clients would.
	for i := 1; i <= 1000; i++ {
		tl := a
		if i%2 == 0 {
			tl = b
		}
		tl.Add(Complete, 200, time.Duration(i)*time.Millisecond)
	}
	b.Add(Refused, 429, time.Millisecond)
	b.Add(Degraded, 200, 2*time.Second)
	a.Merge(b)
	s := a.Summarise("test", 2*time.Second)
	if s.Sent != 1002 || s.Complete != 1000 || s.Refused != 1 || s.Degraded != 1 {
		t.Fatalf("counts: %+v", s)
	}
	near := func(name string, got, want time.Duration) {
		t.Helper()
		// HdrHistogram at 3 significant digits: within 0.1 %.
		if d := got - want; d < -want/1000-time.Microsecond || d > want/1000+time.Microsecond {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	near("complete p50", s.CompleteLatency.P50, 500*time.Millisecond)
	near("complete p99", s.CompleteLatency.P99, 990*time.Millisecond)
	near("complete max", s.CompleteLatency.Max, 1000*time.Millisecond)
	// The degraded 2 s answer is in the overall tail, the 429 is not.
	near("max", s.Latency.Max, 2*time.Second)
	near("refusal p50", s.RefusalLatency.P50, time.Millisecond)
	if g := s.Goodput(); g != 500 {
		t.Errorf("goodput %.1f, want 500", g)
	}
	if sh := s.Share(s.Refused); sh != 1.0/1002 {
		t.Errorf("refused share %f", sh)
	}
}

func TestLateCountsEveryKindOfAnswer(t *testing.T) {
	tl := NewTally()
	tl.LateAfter(250 * time.Millisecond)
	tl.Add(Complete, 200, 100*time.Millisecond)
	tl.Add(Degraded, 200, 300*time.Millisecond)
	tl.Add(Refused, 429, 400*time.Millisecond)
	other := NewTally()
	other.Add(Failed, 0, time.Second) // counts only where LateAfter is set
	tl.Merge(other)
	if s := tl.Summarise("t", time.Second); s.Late != 2 {
		t.Fatalf("late %d, want 2", s.Late)
	}
}

func TestPoolTakesPercentilesOverEveryRun(t *testing.T) {
	// Two runs of 100 requests: one all 10 ms, one with a single 1 s
	// outlier. Each run's own p99 is 10 ms; pooled, the outlier is 1 in
	// 200, above the 99th percentile, and the max keeps it.
	var runs []Summary
	for r := range 2 {
		tl := NewTally()
		for i := range 100 {
			d := 10 * time.Millisecond
			if r == 1 && i == 0 {
				d = time.Second
			}
			tl.Add(Complete, 200, d)
		}
		s := tl.Summarise("open 100/s", time.Second)
		s.Counters = map[string]float64{"hedges": float64(r + 1)}
		runs = append(runs, s)
	}
	p := Pool(runs)
	if p.Sent != 200 || p.Complete != 200 || p.Elapsed != 2*time.Second || p.Goodput() != 100 {
		t.Fatalf("pooled counts: %+v", p)
	}
	if p.Latency.P99 > 11*time.Millisecond || p.Latency.Max < 999*time.Millisecond {
		t.Fatalf("pooled p99 %s, max %s", p.Latency.P99, p.Latency.Max)
	}
	if p.Counters["hedges"] != 3 {
		t.Fatalf("pooled counters %v", p.Counters)
	}
	if runs[0].Sent != 100 || runs[0].Latency.Max > 11*time.Millisecond {
		t.Fatalf("pooling changed a run: %+v", runs[0])
	}
}

// HedgeShare is the hedges over the shard RPCs the router would have made
// without them, and absent when the counters were not read.
func TestHedgeShare(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counters map[string]float64
		want     float64
		ok       bool
	}{
		{"not scraped", nil, 0, false},
		{"no RPCs", map[string]float64{"trawl_shard_request_duration_seconds_count": 0}, 0, false},
		{"5 hedges on 100 RPCs", map[string]float64{"trawl_shard_request_duration_seconds_count": 105, "trawl_scatter_hedges_total": 5}, 0.05, true},
		{"no hedges", map[string]float64{"trawl_shard_request_duration_seconds_count": 30}, 0, true},
	} {
		got, ok := Summary{Counters: tc.counters}.HedgeShare()
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: HedgeShare() = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
