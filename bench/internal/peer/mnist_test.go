package peer

import (
	"slices"
	"testing"

	"github.com/trawl-search/trawl/vector"
)

func TestLoadMNISTFromTheModuleCache(t *testing.T) {
	dir, err := MNISTDir(t.Context(), ".")
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadMNIST(dir, 2000, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Data) != 2000*784 || len(c.Queries) != 50 || c.Dim != 784 {
		t.Fatalf("%d floats, %d queries of %d-D", len(c.Data), len(c.Queries), c.Dim)
	}
	lit := 0
	for _, x := range c.Data {
		if x < 0 || x > 255 || x != float32(int(x)) {
			t.Fatalf("pixel %v", x)
		}
		if x > 0 {
			lit++
		}
	}
	// About a fifth of MNIST's pixels are ink.
	if share := float64(lit) / float64(len(c.Data)); share < 0.1 || share > 0.3 {
		t.Fatalf("%.2f of the pixels lit", share)
	}
	// A training image asked as a query finds itself first, at distance 0.
	c.Queries[0] = slices.Clone(c.Data[123*784 : 124*784])
	got, err := Exact(t.Context(), c, 5, vector.Euclidean)
	if err != nil {
		t.Fatal(err)
	}
	if got[0][0] != "123" || len(got[1]) != 5 {
		t.Fatalf("exact answers %v, %v", got[0], got[1])
	}
	if _, err := LoadMNIST(dir, 60_001, 1); err == nil {
		t.Fatal("60 001 training rows loaded")
	}
}
