package vector

import (
	"fmt"
	"unsafe"
)

// ScoreRows scores every query against every row of rows (row-major, dim
// floats each) and writes query i's score for row j to out[i*n+j], where n
// is len(rows)/dim. The score is Dot for Cosine and DotProduct, and
// L2Squared for Euclidean. Every query must have dim floats and out room
// for len(queries)*n scores.
//
// Kernels with tile routines score up to six queries against four rows per
// call, so one load of a row feeds several queries. A pair's score is the
// same whichever tile (or the one-by-one path of a lone query) computed
// it, so a scan's answer does not depend on how queries were batched; it
// may differ in the last bits from Dot or L2Squared, which sum in another
// order.
func (k Kernel) ScoreRows(m Metric, queries [][]float32, rows []float32, dim int, out []float32) {
	if dim <= 0 {
		panic(fmt.Sprintf("vector: ScoreRows with dimension %d", dim))
	}
	n := len(rows) / dim
	if len(out) < len(queries)*n {
		panic(fmt.Sprintf("vector: ScoreRows needs %d scores, out has %d", len(queries)*n, len(out)))
	}
	for i, q := range queries {
		if len(q) != dim {
			panic(fmt.Sprintf("vector: ScoreRows query %d has %d floats, want %d", i, len(q), dim))
		}
	}
	if k.tile == nil {
		k.scorePairs(m, queries, rows, dim, n, out)
		return
	}
	k.scoreTiles(m, queries, rows, dim, n, out)
}

func (k Kernel) scorePairs(m Metric, queries [][]float32, rows []float32, dim, n int, out []float32) {
	score := k.Dot
	if m == Euclidean {
		score = k.L2Squared
	}
	for j := range n {
		row := rows[j*dim : (j+1)*dim]
		for i, q := range queries {
			out[i*n+j] = score(q, row)
		}
	}
}

// scoreTiles walks the rows four at a time and, for each group, every
// query: the group (four rows, 24 KiB at 1536-D) stays in cache (L2; with
// a tile's queries it overflows L1) while all queries use it, so the
// rows are read from memory once per batch, and the tiles prefetch the
// groups that follow (see pfDist), past the end of rows too: the caller's
// next block usually follows in memory. A lone query instead walks the
// rows one by one, which reads memory as one sequential stream.
func (k Kernel) scoreTiles(m Metric, queries [][]float32, rows []float32, dim, n int, out []float32) {
	t := k.tile
	nq := len(queries)
	if nq == 1 {
		q := &queries[0][0]
		for j := range n {
			out[j] = t.single(m, q, &rows[j*dim], dim)
		}
		return
	}
	// Queries [0, wide) go through six-query tiles, [wide, full) through
	// t.queries-query tiles, the rest one at a time. Two or three left
	// over from the six-query tiles are better served, with one six, as
	// two four-query tiles than as lone queries, which each reload the
	// rows.
	wide := 0
	if t.wide > 0 {
		n6, r := nq/t.wide, nq%t.wide
		if n6 > 0 && (r == 2 || r == 3) {
			n6--
		}
		wide = n6 * t.wide
	}
	full := nq - (nq-wide)%t.queries
	var (
		rp  [4]*float32
		qp  [4]*float32
		qp6 [6]*float32
		o4  [4]float32
		o16 [16]float32
		o24 [24]float32
	)
	base := uintptr(unsafe.Pointer(&rows[0]))
	rowBytes := uintptr(dim) * 4
	for j0 := 0; j0 < n; j0 += 4 {
		// A short last group repeats its last row; those scores are
		// dropped, and every pair still goes through the same arithmetic.
		cnt := min(4, n-j0)
		for j := range 4 {
			rp[j] = &rows[(j0+min(j, cnt-1))*dim]
		}
		// The first two tiles prefetch two rows each of the group pfDist
		// ahead.
		pf := base + uintptr(j0+pfDist*4)*rowBytes
		tile := uintptr(0)
		for i0 := 0; i0 < wide; i0 += t.wide {
			for i := range t.wide {
				qp6[i] = &queries[i0+i][0]
			}
			p := pf + tile%2*2*rowBytes
			t.six(m, &qp6, &rp, dim, &o24, p, p+rowBytes)
			tile++
			for i := range t.wide {
				copy(out[(i0+i)*n+j0:(i0+i)*n+j0+cnt], o24[i*4:i*4+cnt])
			}
		}
		for i0 := wide; i0 < full; i0 += t.queries {
			for i := range t.queries {
				qp[i] = &queries[i0+i][0]
			}
			p := pf + tile%2*2*rowBytes
			t.many(m, &qp, &rp, dim, &o16, p, p+rowBytes)
			tile++
			for i := range t.queries {
				copy(out[(i0+i)*n+j0:(i0+i)*n+j0+cnt], o16[i*4:i*4+cnt])
			}
		}
		for i := full; i < nq; i++ {
			t.one(m, &queries[i][0], &rp, dim, &o4)
			copy(out[i*n+j0:i*n+j0+cnt], o4[:cnt])
		}
	}
}

// pfDist is how many groups of four rows ahead the many-query tiles
// prefetch. The first two query tiles of a group each fetch two rows of
// the group pfDist ahead into cache while they compute, so a batch no
// longer stalls on memory at the start of every group: the hardware
// prefetcher alone does not run far enough ahead of four row streams.
const pfDist = 2
