package main

import (
	"testing"

	"github.com/trawl-search/trawl/bench/internal/promtext"
)

// A degraded answer's shard and reason are what grew between scrapes, the
// path label summed away and unchanged series left out.
func TestMissingDelta(t *testing.T) {
	s := func(path, shard, reason string, v float64) promtext.Sample {
		return promtext.Sample{Labels: map[string]string{"path": path, "shard": shard, "reason": reason}, Value: v}
	}
	for _, tc := range []struct {
		name          string
		before, after []promtext.Sample
		want          string
	}{
		{"nothing scraped", nil, nil, "none"},
		{"nothing grew", []promtext.Sample{s("search", "shard-0", "deadline_exceeded", 3)},
			[]promtext.Sample{s("search", "shard-0", "deadline_exceeded", 3)}, "none"},
		{"a new series", nil, []promtext.Sample{s("search", "shard-1", "unavailable", 1)}, "shard-1 unavailable ×1"},
		{"paths summed, sorted", []promtext.Sample{s("search", "shard-2", "deadline_exceeded", 1)},
			[]promtext.Sample{s("search", "shard-2", "deadline_exceeded", 2), s("query", "shard-2", "deadline_exceeded", 1),
				s("search", "shard-0", "suspect", 4)},
			"shard-0 suspect ×4, shard-2 deadline_exceeded ×2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := missingText(missingDelta(tc.before, tc.after)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
