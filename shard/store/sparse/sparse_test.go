package sparse

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// model is the brute-force twin of an Index: each row's vector as a map.
type model []map[uint32]float32

func randVector(r *rand.Rand, vocab int) Vector {
	n := r.IntN(8)
	v := Vector{}
	seen := map[uint32]bool{}
	for range n {
		t := uint32(r.IntN(vocab))
		if seen[t] {
			continue
		}
		seen[t] = true
		v.Indices = append(v.Indices, t)
		v.Values = append(v.Values, float32(r.NormFloat64()))
	}
	return v
}

func toMap(v Vector) map[uint32]float32 {
	if v.Len() == 0 {
		return nil
	}
	m := map[uint32]float32{}
	for i, t := range v.Indices {
		m[t] = v.Values[i]
	}
	return m
}

// bruteScore sums query value × weight × row value in ascending term
// order, as Score does.
func bruteScore(q Vector, w []float32, row map[uint32]float32) (float32, bool) {
	s := q.Sorted()
	var ws []float32
	if w != nil {
		byTerm := map[uint32]float32{}
		for i, t := range q.Indices {
			byTerm[t] = w[i]
		}
		for _, t := range s.Indices {
			ws = append(ws, byTerm[t])
		}
	}
	var sum float32
	hit := false
	for i, t := range s.Indices {
		dv, ok := row[t]
		if !ok {
			continue
		}
		qw := s.Values[i]
		if ws != nil {
			qw *= ws[i]
		}
		sum += qw * dv
		hit = true
	}
	return sum, hit
}

func check(t *testing.T, x *Index, m model, r *rand.Rand) {
	t.Helper()
	require.Equal(t, len(m), x.Rows())
	docs, total := 0, 0
	df := map[uint32]int{}
	for row, want := range m {
		got, ok := x.Vector(row)
		require.Equal(t, want != nil, ok, "row %d", row)
		require.Equal(t, want, toMap(got), "row %d", row)
		if want != nil {
			docs++
			total += len(want)
			for term := range want {
				df[term]++
			}
		}
	}
	require.Equal(t, docs, x.Docs())
	require.Equal(t, total, x.Postings())
	require.Equal(t, len(df), x.Terms())
	for term, n := range df {
		require.Equal(t, n, x.DF(term))
	}
	for range 5 {
		q := randVector(r, 40)
		var w []float32
		if r.IntN(2) == 0 {
			w = make([]float32, q.Len())
			for i := range w {
				w[i] = IDF(uint64(docs), uint64(df[q.Indices[i]]))
			}
		}
		mod := uint32(r.IntN(3) + 1)
		allow := func(row uint32) bool { return row%mod == 0 }
		got := x.Score(Query{Vector: q, Weights: w, Allow: allow})
		want := []Scored{}
		for row, vec := range m {
			if !allow(uint32(row)) {
				continue
			}
			if s, ok := bruteScore(q, w, vec); ok {
				want = append(want, Scored{Row: uint32(row), Score: s})
			}
		}
		byRow := func(a, b Scored) int { return int(a.Row) - int(b.Row) }
		slices.SortFunc(got, byRow)
		slices.SortFunc(want, byRow)
		require.Equal(t, want, got)
	}
}

// TestIndexAgainstModel applies random sets, removes and store-style
// deletes (the last row moved into the hole) and checks every row, every
// document frequency and filtered, weighted scores against brute force,
// and that the snapshot form restores the same index.
func TestIndexAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		x := New()
		var m model
		for range 300 {
			switch op := r.IntN(10); {
			case op < 5 || len(m) == 0: // upsert: overwrite or append
				row := r.IntN(len(m) + 1)
				v := randVector(r, 40)
				x.Set(row, v)
				if row == len(m) {
					m = append(m, nil)
				}
				m[row] = toMap(v)
			case op < 7:
				row := r.IntN(len(m))
				x.Remove(row)
				m[row] = nil
			default: // the store's delete
				row, last := r.IntN(len(m)), len(m)-1
				x.Remove(row)
				if row != last {
					x.Move(last, row)
				}
				x.Truncate(last)
				m[row] = m[last]
				m = m[:last]
			}
		}
		check(t, x, m, r)
		y, err := Decode(x.AppendBinary(nil), x.Rows())
		require.NoError(t, err)
		check(t, y, m, r)
		require.Equal(t, x.AppendBinary(nil), y.AppendBinary(nil))
		// The restored index keeps working.
		if len(m) > 0 {
			y.Remove(0)
			m[0] = nil
			check(t, y, m, r)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    Vector
		err  string
	}{
		{"ok", Vector{Indices: []uint32{3, 1}, Values: []float32{0.5, -1}}, ""},
		{"empty", Vector{}, ""},
		{"lengths", Vector{Indices: []uint32{1, 2}, Values: []float32{1}}, "indices has 2 elements and values 1"},
		{"duplicate", Vector{Indices: []uint32{1, 2, 1}, Values: []float32{1, 2, 3}}, "indices[2]: 1 repeats"},
		{"nan", Vector{Indices: []uint32{1}, Values: []float32{float32(math.NaN())}}, "values[0] is not a finite number"},
		{"inf", Vector{Indices: []uint32{1}, Values: []float32{float32(math.Inf(-1))}}, "values[0] is not a finite number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.v.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestIDFMatchesQdrant(t *testing.T) {
	// ln((N − df + 0.5)/(df + 0.5) + 1): a term in no document of 10
	// weighs ln(22), one in all of them ln(1 + 0.5/10.5).
	require.InDelta(t, math.Log(22), float64(IDF(10, 0)), 1e-6)
	require.InDelta(t, math.Log(1+0.5/10.5), float64(IDF(10, 10)), 1e-6)
}

// FuzzDecode feeds the snapshot decoder arbitrary bytes: it errs or
// returns an index whose encoding round-trips, never panics.
func FuzzDecode(f *testing.F) {
	x := New()
	x.Set(0, Vector{Indices: []uint32{1, 5}, Values: []float32{1, 2}})
	x.Set(2, Vector{Indices: []uint32{5}, Values: []float32{3}})
	f.Add(x.AppendBinary(nil), 3)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, b []byte, rows int) {
		if rows < 0 || rows > 1<<12 {
			return
		}
		y, err := Decode(b, rows)
		if err != nil {
			return
		}
		z, err := Decode(y.AppendBinary(nil), rows)
		require.NoError(t, err)
		require.Equal(t, y.AppendBinary(nil), z.AppendBinary(nil))
	})
}

// TestScoreMapAndDensePaths: a query whose lists are short beside the
// shard accumulates in a map, one whose lists are long in a dense array;
// both give the brute-force scores, filtered.
func TestScoreMapAndDensePaths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	x := New()
	m := make(model, 4000)
	for row := range m {
		v := Vector{Indices: []uint32{0}, Values: []float32{float32(r.IntN(5))}} // term 0: every row
		if row%500 == 0 {
			v = Vector{Indices: []uint32{0, 1, 2}, Values: []float32{1, float32(row), -0.5}} // rare terms 1, 2
		}
		x.Set(row, v)
		m[row] = toMap(v)
	}
	for _, q := range []Vector{
		{Indices: []uint32{2, 1}, Values: []float32{2, 0.25}}, // 16 postings: the map
		{Indices: []uint32{1, 0}, Values: []float32{1, 3}},    // 4008 postings: the array
	} {
		allow := func(row uint32) bool { return row%1000 != 0 }
		got := x.Score(Query{Vector: q, Allow: allow})
		want := []Scored{}
		for row, vec := range m {
			if s, ok := bruteScore(q, nil, vec); ok && allow(uint32(row)) {
				want = append(want, Scored{Row: uint32(row), Score: s})
			}
		}
		byRow := func(a, b Scored) int { return int(a.Row) - int(b.Row) }
		slices.SortFunc(got, byRow)
		slices.SortFunc(want, byRow)
		require.Equal(t, want, got)
	}
}
