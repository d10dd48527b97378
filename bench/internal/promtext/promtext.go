// Package promtext reads counters from a Prometheus text-format /metrics
// page: enough to take the difference of a few counters over a benchmark
// run, without pulling a scrape library into the bench module.
package promtext

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
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
		// A sample may end with a timestamp; the value is the first field.
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
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

// Scrape fetches url (a /metrics page) and parses it.
func Scrape(ctx context.Context, c *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	m, err := Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
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
