package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-search/trawl/bench/internal/peer"
	"github.com/trawl-search/trawl/vector"
)

// A run over several collections reports each kind's default recall
// against its bar, and its charts carry every system.
func TestPeerResultsOfCollections(t *testing.T) {
	sys := func(name string, nprobe int, index bool, recall float64, ms int) *peerSystem {
		d := time.Duration(ms) * time.Millisecond
		return &peerSystem{name: name + ", 3 shards", nprobe: nprobe, index: index, recall: recall,
			recallAt: map[int]float64{1: recall, 100: recall},
			rounds:   []peerRound{{single: summary(100, d), multi: summary(int(4000/ms), d)}}}
	}
	r := &peerResults{
		plan: peerPlan{recipe: peer.Recipe{Rows: 60000, Queries: 100, Dim: 784}, shards: 3, k: 10, rounds: 1, clients: 4,
			recallKs: []int{1, 100}, dataset: "mnist", metric: vector.Euclidean, about: "MNIST",
			collections: []string{"flat", "int8", "ivf"}},
		systems: []*peerSystem{
			sys("trawl flat (float32)", 0, false, 1, 12),
			sys("trawl int8 (re-scored)", 0, false, 0.97, 4),
			sys("trawl ivf (int8)", 0, true, 0.99, 2),
			sys("trawl ivf (int8) nprobe 1", 1, true, 0.65, 1),
			sys("trawl ivf (int8) nprobe 4", 4, true, 0.94, 2),
			sys("trawl ivf (int8) nprobe 128 (every list)", 128, true, 1, 6),
		},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "RESULTS-test.md")
	if err := r.write(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"# trawl's flat, int8, ivf collections on MNIST-784 (60000 × 784, l2)",
		"- trawl flat (float32): recall@10 1.0000, bar 1.00: met.",
		"- trawl int8 (re-scored): recall@10 0.9700, bar 0.98: **not met**.",
		"- trawl ivf (int8): recall@10 0.9900, bar 0.95: met.",
		"`make bench-realdata`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, png := range []string{"RESULTS-test.png", "RESULTS-test-curve.png"} {
		if _, err := os.Stat(filepath.Join(dir, png)); err != nil {
			t.Error(err)
		}
	}
}
