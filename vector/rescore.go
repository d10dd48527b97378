package vector

import "fmt"

// Rescore returns q.K hits chosen among the candidate rows cands (row
// numbers into rows), best first, ties by id ascending, leaving out
// q.Exclude. Each candidate is scored exactly as Scan scores it: by the
// one-query path of ScoreRows, which gives the same bits as any tile, so
// a hit's score equals the one an exact scan of every row returns. This is
// the second half of an approximate scan (quantized codes choose the
// candidates; these rows decide the answer). The candidates must be
// distinct (a row offered twice would be returned twice); one out of
// range is an error.
func (k Kernel) Rescore(m Metric, rows Rows, q Query, cands []int32) ([]Hit, error) {
	dim := rows.Dim
	if dim <= 0 || len(q.Vector) != dim {
		return nil, fmt.Errorf("rescore: query has %d dimensions, rows %d", len(q.Vector), dim)
	}
	if err := rows.Check(); err != nil {
		return nil, fmt.Errorf("rescore: %w", err)
	}
	n := rows.Len()
	top := NewTopK(min(max(q.K, 0), len(cands)), rows.IDs)
	qs := [][]float32{q.Vector}
	var score [1]float32
	neg := m == Euclidean
	for _, c := range cands {
		if c < 0 || int(c) >= n {
			return nil, fmt.Errorf("rescore: candidate row %d of %d", c, n)
		}
		if q.Exclude != "" && rows.IDs[c] == q.Exclude {
			continue
		}
		k.ScoreRows(m, qs, rows.Row(int(c)), dim, score[:])
		key := score[0]
		if neg {
			key = -key
		}
		top.Push(c, key)
	}
	rs, keys := top.Sorted()
	hits := make([]Hit, len(rs))
	for i, r := range rs {
		hits[i] = Hit{ID: rows.IDs[r], Score: m.scoreOf(keys[i])}
	}
	return hits, nil
}
