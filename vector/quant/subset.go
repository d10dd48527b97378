package quant

import (
	"fmt"

	"github.com/trawl-search/trawl/vector"
)

// Queries is a batch of queries encoded once under a Scale so that any
// subset of them can be scored against any Codes encoded with it. Scan
// scores the whole batch against one arena; an index that keeps many
// small arenas (vector/ivf's inverted lists), each probed by only some of
// a batch's queries, scores the subset that chose each arena with a
// Scorer. Keys are the ones Scan ranks candidates by, so candidates chosen
// this way equal Scan's for the same rows.
//
// Queries is read-only once made and safe to share between Scorers.
type Queries struct {
	k     Kernel
	m     vector.Metric
	scale Scale
	dim   int
	b     batch
	units []float32
}

// EncodeQueries encodes vecs (each of s.Dim() floats) under s for metric
// m. For Cosine, queries are unit vectors, as for Scan.
func (k Kernel) EncodeQueries(s Scale, m vector.Metric, vecs [][]float32) (*Queries, error) {
	dim := s.Dim()
	if dim == 0 {
		return nil, fmt.Errorf("quant: encode queries with the zero Scale")
	}
	qcodes := vector.AlignedInt8(len(vecs) * dim)
	qs := make([][]int8, len(vecs))
	units := make([]float32, len(vecs))
	for i, v := range vecs {
		if len(v) != dim {
			return nil, fmt.Errorf("quant: query %d has %d dimensions, want %d", i, len(v), dim)
		}
		qs[i] = qcodes[i*dim : (i+1)*dim : (i+1)*dim]
		units[i] = s.encodeQuery(qs[i], v)
	}
	return &Queries{k: k, m: m, scale: s, dim: dim, b: k.prepare(qs, dim), units: units}, nil
}

// Len is the number of queries.
func (q *Queries) Len() int { return len(q.units) }

// Scorer scores subsets of a Queries batch against code arenas. It keeps
// its buffers between calls, so scoring allocates nothing once they have
// grown; it is not safe for concurrent use (one per goroutine).
type Scorer struct {
	q    *Queries
	sub  batch
	sums []int32
}

// NewScorer returns a Scorer for q.
func (q *Queries) NewScorer() *Scorer { return &Scorer{q: q} }

// Keys writes the candidate key of query sel[i] for row lo+j of c to
// out[i*(hi-lo)+j], for rows [lo, hi): larger is better, and the key is
// what Scan ranks that pair by (the code dot product for Cosine and
// DotProduct; 2·t·sum − |x|² for Euclidean, see collect), so it is
// comparable across arenas for one query, never across queries. c must be
// encoded with the Scale q was, out must have room for len(sel)·(hi-lo)
// keys, and sel must index q.
func (s *Scorer) Keys(sel []int, c *Codes, lo, hi int, out []float32) {
	q := s.q
	if c.dim != q.dim || !c.scale.Equal(q.scale) {
		panic("quant: Keys on codes of another Scale")
	}
	if lo < 0 || hi > c.Len() || lo > hi {
		panic(fmt.Sprintf("quant: Keys rows [%d, %d) of %d", lo, hi, c.Len()))
	}
	n := hi - lo
	if len(out) < len(sel)*n {
		panic(fmt.Sprintf("quant: Keys needs %d keys, out has %d", len(sel)*n, len(out)))
	}
	if n == 0 || len(sel) == 0 {
		return
	}
	s.sub.codes = s.sub.codes[:0]
	s.sub.offset = s.sub.offset[:0]
	for _, i := range sel {
		s.sub.codes = append(s.sub.codes, q.b.codes[i])
		if q.b.offset != nil {
			s.sub.offset = append(s.sub.offset, q.b.offset[i])
		}
	}
	if q.b.offset == nil {
		s.sub.offset = nil
	}
	if cap(s.sums) < len(sel)*n {
		s.sums = make([]int32, len(sel)*n)
	}
	// One run of rows back to back at a time: all of them for a list's
	// codes (one array), a chunk's worth of a shard's.
	for r := lo; r < hi; {
		data := c.run(r, hi)
		nr := len(data) / c.dim
		sums := s.sums[:len(sel)*nr]
		q.k.score(s.sub, data, c.sums[r:r+nr], c.dim, sums)
		norms := c.norms[r : r+nr]
		for i, qi := range sel {
			o := out[i*n+r-lo : i*n+r-lo+nr]
			ss := sums[i*nr : (i+1)*nr]
			if q.m != vector.Euclidean {
				for j, sum := range ss {
					o[j] = float32(sum)
				}
				continue
			}
			twoT := 2 * q.units[qi]
			for j, sum := range ss {
				o[j] = euclideanKey(twoT, sum, norms[j])
			}
		}
		r += nr
	}
}

// euclideanKey is a Euclidean candidate's key, 2·t·sum − |x|² (|q − x|²
// less the constant |q|², negated). The product is rounded to float32
// explicitly so no compiler fuses it into a multiply-add: every machine
// computes the same key, and so the same candidates.
func euclideanKey(twoT float32, sum int32, norm float32) float32 {
	return float32(twoT*float32(sum)) - norm
}
