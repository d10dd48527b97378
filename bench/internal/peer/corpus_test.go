package peer

import (
	"math"
	"slices"
	"testing"

	"github.com/trawl-search/trawl/vector"
)

func TestGenerateIsDeterministicAndUnit(t *testing.T) {
	r := Recipe{Rows: 300, Queries: 5, Dim: 64, Clusters: 7, Noise: 1, Seed: 3}
	a, err := Generate(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(r)
	if !slices.Equal(a.Data, b.Data) || !slices.Equal(a.Queries[4], b.Queries[4]) {
		t.Fatal("two draws of one recipe differ")
	}
	for i := range r.Rows {
		var n float64
		for _, x := range a.Data[i*r.Dim : (i+1)*r.Dim] {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Fatalf("row %d has squared norm %v", i, n)
		}
	}
}

func TestExactFindsTheQueryItself(t *testing.T) {
	r := Recipe{Rows: 500, Queries: 3, Dim: 32, Clusters: 5, Noise: 1, Seed: 1}
	c, err := Generate(r)
	if err != nil {
		t.Fatal(err)
	}
	// A query equal to a stored row has that row first.
	c.Queries[0] = slices.Clone(c.Data[17*r.Dim : 18*r.Dim])
	got, err := Exact(t.Context(), c, 10, vector.Cosine)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || len(got[0]) != 10 || got[0][0] != "17" {
		t.Fatalf("exact answers %v", got)
	}
	if Recall(got, got) != 1 {
		t.Fatal("recall of the truth is not 1")
	}
}

func TestRecallCountsIDSets(t *testing.T) {
	want := [][]string{{"1", "2", "3", "4"}, {"5", "6"}}
	got := [][]string{{"4", "3", "9", "9"}, {"6", "6"}}
	if r := Recall(got, want); math.Abs(r-3.0/6) > 1e-12 {
		t.Fatalf("recall %v, want 0.5 (a repeated id counts once)", r)
	}
}

func TestStreamedTruthEqualsWhole(t *testing.T) {
	for _, clusters := range []int{0, 6} {
		r := Recipe{Rows: 1000, Queries: 7, Dim: 24, Clusters: clusters, Noise: 1, Seed: 9}
		c, err := Generate(r)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := Exact(t.Context(), c, 20, vector.Cosine)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := NewTruth(c.Queries, 20, vector.Cosine)
		if err != nil {
			t.Fatal(err)
		}
		var streamed []float32
		// Chunks of 97 rows: the running top-20 is merged across chunk
		// edges, and the streamed rows are the generated ones.
		if err := Stream(t.Context(), r, 97, func(first int, rows []float32) error {
			streamed = append(streamed, rows...)
			return tr.Add(t.Context(), first, rows)
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(streamed, c.Data) {
			t.Fatalf("clusters %d: streamed rows differ from the generated ones", clusters)
		}
		if got := tr.IDs(20); !slices.EqualFunc(got, whole, slices.Equal) {
			t.Fatalf("clusters %d: streamed truth %v, whole %v", clusters, got[0], whole[0])
		}
		if got := tr.IDs(1); len(got[0]) != 1 || got[0][0] != whole[0][0] {
			t.Fatalf("clusters %d: top-1 %v, want the top-20's first %v", clusters, got[0], whole[0][0])
		}
	}
}
