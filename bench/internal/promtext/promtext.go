// Package promtext reads counters from a Prometheus text-format /metrics
// page: enough to take the difference of a few counters over a benchmark
// run, without pulling a scrape library into the bench module.
package promtext

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Parse sums every sample of each metric over its label sets: a counter
// family's total. Histogram series (_bucket, _sum, _count) appear under
// their own names.
func Parse(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := cut(line)
		if !ok {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := value(line, rest)
		if err != nil {
			return nil, err
		}
		out[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// value reads a sample's value from what follows its label set: the
// first field, as a sample may end with a timestamp.
func value(line, rest string) (float64, error) {
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return 0, fmt.Errorf("metrics line %q: no value", line)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, fmt.Errorf("metrics line %q: %w", line, err)
	}
	return v, nil
}

// cut splits a sample line into its metric name and what follows the
// label set (label values may hold spaces and braces inside quotes).
func cut(line string) (name, rest string, ok bool) {
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", "", false
	}
	name = line[:i]
	if line[i] == ' ' {
		return name, line[i+1:], true
	}
	inQuote, esc := false, false
	for j := i + 1; j < len(line); j++ {
		c := line[j]
		switch {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '"':
			inQuote = !inQuote
		case c == '}' && !inQuote:
			return name, line[j+1:], true
		}
	}
	return "", "", false
}

// Sample is one series of a metric: its labels and value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Samples returns every series of the metric called name, labels kept
// (Parse sums them away): the per-replica calls of a histogram's _count,
// say.
func Samples(r io.Reader, name string) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, name) {
			continue
		}
		n, rest, ok := cut(line)
		if !ok {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		if n != name {
			continue
		}
		labels, err := parseLabels(line[len(n) : len(line)-len(rest)])
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		v, err := value(line, rest)
		if err != nil {
			return nil, err
		}
		out = append(out, Sample{Labels: labels, Value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// parseLabels reads a label set, `{a="x",b="y"}` or empty, unescaping
// values as the text format escapes them (\\, \", \n).
func parseLabels(set string) (map[string]string, error) {
	out := map[string]string{}
	set = strings.TrimSpace(set)
	if set == "" {
		return out, nil
	}
	if len(set) < 2 || set[0] != '{' || set[len(set)-1] != '}' {
		return nil, fmt.Errorf("label set %q", set)
	}
	s := set[1 : len(set)-1]
	for len(strings.TrimSpace(s)) > 0 {
		s = strings.TrimLeft(s, " ,")
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return nil, fmt.Errorf("label set %q", set)
		}
		key := strings.TrimSpace(s[:eq])
		var val strings.Builder
		i, closed := eq+2, false
		for ; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			if c == '"' {
				closed = true
				break
			}
			val.WriteByte(c)
		}
		if !closed {
			return nil, fmt.Errorf("label set %q: unterminated value", set)
		}
		out[key] = val.String()
		s = s[i+1:]
	}
	return out, nil
}

// Scrape fetches url (a /metrics page) and parses it.
func Scrape(ctx context.Context, c *http.Client, url string) (map[string]float64, error) {
	var m map[string]float64
	err := fetch(ctx, c, url, func(r io.Reader) (err error) { m, err = Parse(r); return err })
	return m, err
}

// ScrapeSamples fetches url (a /metrics page) and returns the series of
// the metric called name.
func ScrapeSamples(ctx context.Context, c *http.Client, url, name string) ([]Sample, error) {
	var out []Sample
	err := fetch(ctx, c, url, func(r io.Reader) (err error) { out, err = Samples(r, name); return err })
	return out, err
}

func fetch(ctx context.Context, c *http.Client, url string, read func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	if err := read(resp.Body); err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	return nil
}

// Delta is after − before for each of names (a counter that is absent
// from both is left out).
func Delta(before, after map[string]float64, names ...string) map[string]float64 {
	out := map[string]float64{}
	for _, n := range names {
		a, okA := after[n]
		b, okB := before[n]
		if okA || okB {
			out[n] = a - b
		}
	}
	return out
}

// Quantile estimates the q-quantile (0..1) of what a histogram observed
// between two scrapes, from its _bucket series before and after (series
// that differ in labels other than le are summed), interpolating linearly
// inside the bucket as Prometheus's histogram_quantile does. ok is false
// when nothing was observed in between. A quantile in the +Inf bucket is
// the highest finite bound.
func Quantile(before, after []Sample, q float64) (v float64, ok bool) {
	cum := func(ss []Sample) map[float64]float64 {
		out := map[float64]float64{}
		for _, s := range ss {
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err != nil {
				continue
			}
			out[le] += s.Value
		}
		return out
	}
	b, a := cum(before), cum(after)
	bounds := make([]float64, 0, len(a))
	for le := range a {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return 0, false
	}
	total := a[bounds[len(bounds)-1]] - b[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		c := a[le] - b[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return prevBound, true
			}
			if c == prevCount {
				return le, true
			}
			return prevBound + (le-prevBound)*(rank-prevCount)/(c-prevCount), true
		}
		prevBound, prevCount = le, c
	}
	return prevBound, true
}
