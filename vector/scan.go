package vector

import (
	"context"
	"fmt"
	"math"
)

// Rows is a read-only view of stored vectors: row i is
// Data[i*Dim:(i+1)*Dim] and its id is IDs[i].
type Rows struct {
	Data []float32
	Dim  int
	IDs  []string
}

// Len is the number of rows.
func (r Rows) Len() int { return len(r.IDs) }

// Row returns row i.
func (r Rows) Row(i int) []float32 { return r.Data[i*r.Dim : (i+1)*r.Dim] }

// Query is one search in a batch scan.
type Query struct {
	Vector []float32
	K      int
	// Exclude is an id left out of the answer (search by stored id).
	Exclude string
}

// BlockRows is how many rows a scan scores before it looks at its context
// again: small enough that a passed deadline stops a scan within
// microseconds, large enough that the check costs nothing.
const BlockRows = 256

// Scan returns, for each query, its k best rows best first. One pass over the
// rows serves the whole batch: each block of rows is scored against every
// query while it is still in cache. The context is checked every block; a
// scan whose context ends returns its error (wrapped) and no hits.
func (k Kernel) Scan(ctx context.Context, m Metric, rows Rows, queries []Query) ([][]Hit, error) {
	if rows.Dim <= 0 {
		return nil, fmt.Errorf("scan: dimension %d", rows.Dim)
	}
	for i, q := range queries {
		if len(q.Vector) != rows.Dim {
			return nil, fmt.Errorf("scan: query %d has %d dimensions, want %d", i, len(q.Vector), rows.Dim)
		}
	}
	tops := make([]*TopK, len(queries))
	for qi, q := range queries {
		tops[qi] = NewTopK(q.K, rows.IDs)
	}
	if err := k.scanRange(ctx, m, rows, queries, tops, 0, rows.Len()); err != nil {
		return nil, err
	}
	out := make([][]Hit, len(queries))
	for qi, t := range tops {
		rs, keys := t.Sorted()
		hits := make([]Hit, len(rs))
		for i, r := range rs {
			hits[i] = Hit{ID: rows.IDs[r], Score: m.scoreOf(keys[i])}
		}
		out[qi] = hits
	}
	return out, nil
}

func (k Kernel) scanRange(ctx context.Context, m Metric, rows Rows, queries []Query, tops []*TopK, lo, hi int) error {
	dim := rows.Dim
	for b := lo; b < hi; b += BlockRows {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scan stopped after %d of %d rows: %w", b-lo, hi-lo, err)
		}
		end := min(b+BlockRows, hi)
		for qi, q := range queries {
			t := tops[qi]
			for r := b; r < end; r++ {
				row := rows.Data[r*dim : (r+1)*dim]
				var key float32
				if m == Euclidean {
					key = -k.L2Squared(q.Vector, row)
				} else {
					key = k.Dot(q.Vector, row)
				}
				if th, full := t.Threshold(); full && key < th {
					continue
				}
				if q.Exclude != "" && rows.IDs[r] == q.Exclude {
					continue
				}
				t.Push(int32(r), key)
			}
		}
	}
	return nil
}

// scoreOf turns a scan key back into the score the API reports.
func (m Metric) scoreOf(key float32) float32 {
	if m == Euclidean {
		return float32(math.Sqrt(float64(-key)))
	}
	return key
}

// Ref is a merged hit and which input list it came from.
type Ref struct {
	List int
	Hit
}

// Merge returns the best k hits over lists that are each sorted best first,
// as Better orders them. The result is the exact top k of their union.
func (m Metric) Merge(k int, lists [][]Hit) []Ref {
	pos := make([]int, len(lists))
	var out []Ref
	for len(out) < k {
		best := -1
		for li, l := range lists {
			if pos[li] >= len(l) {
				continue
			}
			if best < 0 || m.Better(l[pos[li]], lists[best][pos[best]]) {
				best = li
			}
		}
		if best < 0 {
			break
		}
		out = append(out, Ref{List: best, Hit: lists[best][pos[best]]})
		pos[best]++
	}
	return out
}
