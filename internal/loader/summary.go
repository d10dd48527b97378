package loader

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Summary is what a load did.
type Summary struct {
	Total        int64 // records in the input; -1 when the input never said
	Skipped      int64 // by --resume-from
	Sent         int64 // records sent at least once
	Acknowledged int64 // records the router answered "ok"
	Failed       int64 // records the router refused for good, per id
	Errors       []string
	Elapsed      time.Duration
	// Batches is how many answers were 2xx, and P50 and P99 their
	// latency: request to answer, one attempt, retries' waits excluded.
	Batches  int
	P50, P99 time.Duration
	Retries  int
	// Resume is the --resume-from for a next run: every record before it
	// is acknowledged.
	Resume   int64
	Complete bool // every record of the input acknowledged
}

// Rate is acknowledged records per second of the run.
func (s Summary) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Acknowledged) / s.Elapsed.Seconds()
}

// write prints the summary:
//
//	sent 1000, acknowledged 998, failed 2 in 1.2s (831.7 vectors/s)
//	write latency per batch: p50 12ms p99 40ms (4 batches, 1 retry)
//	failed: record 17 (id "17"): 500 internal: ...
//	resume with --resume-from 17
func (s Summary) write(w io.Writer) {
	fmt.Fprintf(w, "sent %d, acknowledged %d, failed %d", s.Sent, s.Acknowledged, s.Failed)
	if s.Skipped > 0 {
		fmt.Fprintf(w, ", skipped %d (--resume-from)", s.Skipped)
	}
	fmt.Fprintf(w, " in %s (%.1f vectors/s)\n", s.Elapsed.Round(time.Millisecond), s.Rate())
	if s.Batches > 0 {
		fmt.Fprintf(w, "write latency per batch: p50 %s p99 %s (%d batches, %d retries)\n",
			round(s.P50), round(s.P99), s.Batches, s.Retries)
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "failed: %s\n", e)
	}
	if n := s.Failed - int64(len(s.Errors)); n > 0 {
		fmt.Fprintf(w, "failed: ... and %d more\n", n)
	}
	if !s.Complete {
		fmt.Fprintf(w, "resume with --resume-from %d\n", s.Resume)
	}
}

// round keeps about four significant digits of a latency.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// percentiles are the nearest-rank p50 and p99 of ds. A load has at most
// a few hundred thousand batches: sorting them once is cheaper than it
// sounds, and exact.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1 // ceil(p·n), from 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return rank(0.50), rank(0.99)
}
