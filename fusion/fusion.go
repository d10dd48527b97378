package fusion

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// DefaultRRFK is Qdrant's k for {"fusion": "rrf"} and for {"rrf": {}}
// without k: small, so the top ranks of each list weigh most.
const DefaultRRFK = 2

// Point is one ranked point: its id and its score. In an input list only
// the order matters to RRF; DBSF reads the scores, larger better.
type Point struct {
	ID    string
	Score float32
}

// RRF fuses lists by reciprocal rank: a point scores the sum, over the
// lists holding it, of weight-scaled 1 / ((pos + 1) / w + k − 1), pos its
// 0-based position there (1 / (pos + k) at weight 1). weights is nil (all
// 1) or one per list; a weight ≤ 0 makes its list contribute 0. A point
// listed twice in one list counts twice, as in Qdrant. The answer is every
// point once, best first, ties by id ascending.
func RRF(lists [][]Point, k int, weights []float32) ([]Point, error) {
	if k < 1 {
		return nil, fmt.Errorf("rrf k is %d, want at least 1", k)
	}
	if weights != nil && len(weights) != len(lists) {
		return nil, fmt.Errorf("rrf has %d weights for %d prefetches: want one per prefetch", len(weights), len(lists))
	}
	acc := newAccumulator()
	for li, l := range lists {
		w := float32(1)
		if weights != nil {
			w = weights[li]
		}
		for pos, p := range l {
			acc.add(p.ID, positionScore(pos, k, w))
		}
	}
	return acc.sorted(), nil
}

// positionScore is Qdrant's RRF term. Every step is rounded to float32
// explicitly, so the compiler may not fuse it into a different result.
func positionScore(pos, k int, w float32) float32 {
	if w <= 0 {
		return 0
	}
	rank := float32(float32(pos+1) / w)
	den := float32(float32(rank+float32(k)) - 1)
	return float32(1 / den)
}

// DBSF fuses lists by distribution-based score fusion: each list's
// scores are normalised to (s − (μ − 3σ)) / 6σ, μ and σ its mean and
// sample standard deviation, and a point scores the sum of its normalised
// scores. A list of one point, or of equal scores, normalises to 0.5;
// scores beyond 3σ are not clamped. Scores must be larger-better (negate
// distances first). The answer is every point once, best first, ties by
// id ascending.
func DBSF(lists [][]Point) []Point {
	acc := newAccumulator()
	for _, l := range lists {
		for i, s := range Normalize(l) {
			acc.add(l[i].ID, s)
		}
	}
	return acc.sorted()
}

// Normalize is DBSF's normalisation of one list's scores, in list order.
func Normalize(l []Point) []float32 {
	out := make([]float32, len(l))
	switch len(l) {
	case 0:
		return out
	case 1:
		out[0] = 0.5
		return out
	}
	mean, variance := welford(l)
	sd := float32(math.Sqrt(float64(variance))) // a correctly rounded float32 square root
	lo := float32(mean - float32(3*sd))
	hi := float32(mean + float32(3*sd))
	for i, p := range l {
		if lo == hi {
			out[i] = 0.5
			continue
		}
		out[i] = float32(float32(p.Score-lo) / float32(hi-lo))
	}
	return out
}

// welford is the one-pass mean and sample variance (n − 1) of l's
// scores, as Qdrant computes them, in float32; len(l) ≥ 2.
func welford(l []Point) (mean, variance float32) {
	var agg float32
	for i, p := range l {
		old := float32(p.Score - mean)
		mean = float32(mean + float32(old/float32(i+1)))
		delta := float32(p.Score - mean)
		agg = float32(agg + float32(old*delta))
	}
	return mean, float32(agg / float32(float32(len(l))-1))
}

// accumulator sums scores by id, remembering first-seen order (which
// only matters for building the answer, not for its order).
type accumulator struct {
	at  map[string]int
	out []Point
}

func newAccumulator() *accumulator { return &accumulator{at: map[string]int{}} }

func (a *accumulator) add(id string, s float32) {
	if i, ok := a.at[id]; ok {
		a.out[i].Score = float32(a.out[i].Score + s)
		return
	}
	a.at[id] = len(a.out)
	a.out = append(a.out, Point{ID: id, Score: s})
}

// sorted is the sums best first, ties by id ascending; NaN last.
func (a *accumulator) sorted() []Point {
	out := a.out
	if out == nil {
		out = []Point{}
	}
	slices.SortFunc(out, func(x, y Point) int {
		if c := cmp.Compare(y.Score, x.Score); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return out
}
