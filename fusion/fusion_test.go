package fusion

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func pts(ids ...string) []Point {
	out := make([]Point, len(ids))
	for i, id := range ids {
		out[i] = Point{ID: id, Score: float32(len(ids) - i)}
	}
	return out
}

func scored(kv ...any) []Point {
	out := make([]Point, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out = append(out, Point{ID: kv[i].(string), Score: float32(kv[i+1].(float64))})
	}
	return out
}

// The examples of Qdrant's reciprocal_rank_fusion.rs tests, with its
// expected float32 scores, and hand-worked ones at k = 60.
func TestRRF(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lists   [][]Point
		k       int
		weights []float32
		want    []Point
	}{
		{"empty", nil, DefaultRRFK, nil, []Point{}},
		{"one", [][]Point{scored("1", 0.9)}, DefaultRRFK, nil, []Point{{"1", 0.5}}},
		{"three lists (Qdrant's test_rrf_scoring)", [][]Point{
			scored("2", 0.9, "1", 0.8),
			scored("1", 0.7, "2", 0.6, "3", 0.5),
			scored("5", 0.9, "3", 0.5, "1", 0.4),
		}, DefaultRRFK, nil, []Point{{"1", 1.0833334}, {"2", 0.8333334}, {"3", 0.5833334}, {"5", 0.5}}},
		// 1/(0+60) + 1/(1+60) for both: a tie, broken by id.
		{"k=60 crossed", [][]Point{pts("b", "a"), pts("a", "b")}, 60, nil,
			[]Point{{"a", float32(float32(1.0/60) + float32(1.0/61))}, {"b", float32(float32(1.0/61) + float32(1.0/60))}}},
		// Ranks, not scores: the second list's low scores weigh the same.
		{"k=60 ranks only", [][]Point{scored("x", 100.0, "y", 99.0), scored("z", 0.001)}, 60, nil,
			[]Point{{"x", float32(1.0 / 60)}, {"z", float32(1.0 / 60)}, {"y", float32(1.0 / 61)}}},
		{"zero weight (Qdrant's test_rrf_scoring_zero_weight)", [][]Point{scored("1", 0.9), scored("2", 0.9)}, DefaultRRFK, []float32{1, 0},
			[]Point{{"1", 0.5}, {"2", 0}}},
		// Weight 3 makes position 1 count as position 1/3: 1/(2/3 + 1) = 0.6.
		{"weighted (Qdrant's test_rrf_scoring_weighted)", [][]Point{pts("1", "2"), pts("2", "1")}, DefaultRRFK, []float32{3, 1},
			[]Point{{"2", float32(float32(1/(float32(2.0/3)+1)) + 0.5)}, {"1", float32(float32(1/(float32(1.0/3)+1)) + float32(1.0/3))}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RRF(tc.lists, tc.k, tc.weights)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := RRF([][]Point{pts("1"), pts("2")}, 2, []float32{1, 2, 3})
	require.ErrorContains(t, err, "3 weights for 2 prefetches")
	_, err = RRF([][]Point{pts("1")}, 0, nil)
	require.ErrorContains(t, err, "k is 0")
}

func TestDBSF(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lists [][]Point
		want  []Point
	}{
		{"empty", nil, []Point{}},
		{"one point is 0.5", [][]Point{scored("a", 7.0)}, []Point{{"a", 0.5}}},
		{"zero variance is 0.5 each", [][]Point{scored("a", 0.3, "b", 0.3, "c", 0.3)}, []Point{{"a", 0.5}, {"b", 0.5}, {"c", 0.5}}},
		// μ = 2, sample σ = 1: extremes −1 and 5.
		{"1 2 3", [][]Point{scored("a", 3.0, "b", 2.0, "c", 1.0)}, []Point{{"a", float32(4.0 / 6)}, {"b", 0.5}, {"c", float32(2.0 / 6)}}},
		// Sums across lists; the second list's scale does not matter.
		{"two lists", [][]Point{scored("a", 3.0, "b", 2.0, "c", 1.0), scored("c", 300.0, "d", 200.0, "a", 100.0)},
			[]Point{{"a", 1}, {"c", 1}, {"b", 0.5}, {"d", 0.5}}}, // a tie at 1, by id
		// A point beyond 3σ is not clamped: ten at 0 and one at 10 put the
		// outlier past 1.
		{"no clamping", [][]Point{append(scored("z", 10.0), scored("0", 0.0, "1", 0.0, "2", 0.0, "3", 0.0, "4", 0.0, "5", 0.0, "6", 0.0, "7", 0.0, "8", 0.0, "9", 0.0)...)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DBSF(tc.lists)
			if tc.want == nil {
				require.Equal(t, "z", got[0].ID)
				require.Greater(t, got[0].Score, float32(1))
				return
			}
			require.Len(t, got, len(tc.want))
			for i := range tc.want {
				require.Equal(t, tc.want[i].ID, got[i].ID, "position %d", i)
				require.InDelta(t, tc.want[i].Score, got[i].Score, 1e-6, "score of %s", tc.want[i].ID)
			}
		})
	}
}

// Welford's one-pass figures agree with the two-pass ones (Qdrant's
// welford_calc_vs_naive property, with its tolerance).
func TestWelfordAgreesWithNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 2 + rng.IntN(998)
		l := make([]Point, n)
		var sum float64
		for i := range l {
			l[i].Score = float32(rng.Float64()*200 - 100)
			sum += float64(l[i].Score)
		}
		mean := sum / float64(n)
		var ss float64
		for _, p := range l {
			ss += (float64(p.Score) - mean) * (float64(p.Score) - mean)
		}
		m, v := welford(l)
		close := func(a, b float64) {
			tol := max(1e-5, 1e-4*max(abs(a), abs(b)))
			require.LessOrEqual(t, abs(a-b), tol, "%v vs %v", a, b)
		}
		close(float64(m), mean)
		close(float64(v), ss/float64(n-1))
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
