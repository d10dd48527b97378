package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
)

// rig is what the process benchmarks (bulkload, killloop, rebuild) start
// from: a work directory, the router binary built from the repository, a
// corpus of random 1536-D rows as .npy and 256 base64 queries for top 10.
type rig struct {
	work, bin, npy string
	queries        *loadgen.Queries
	// loadBefore is the machine's load average when the run began.
	loadBefore string
}

// newRig builds the rig under a new temporary directory named for the
// benchmark; close removes the directory unless keep.
func newRig(ctx context.Context, root, name string, keep bool, rows int) (r *rig, close func(), err error) {
	rootAbs, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, err
	}
	work, err := os.MkdirTemp("", "trawlbench-"+name+"-")
	if err != nil {
		return nil, nil, err
	}
	close = func() {
		if !keep {
			os.RemoveAll(work)
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	r = &rig{work: work, loadBefore: machine.LoadAvg(), npy: filepath.Join(work, "corpus.npy")}
	log.Printf("work directory %s, load average %s", work, r.loadBefore)
	if r.bin, err = cluster.Build(ctx, rootAbs, work); err != nil {
		return nil, nil, fmt.Errorf("build the router: %w", err)
	}
	if err = cluster.WriteNpy(r.npy, rows, 1536, 42); err != nil {
		return nil, nil, fmt.Errorf("write the corpus: %w", err)
	}
	if r.queries, err = loadgen.NewQueries(256, 1536, 10, loadgen.B64, 1); err != nil {
		return nil, nil, err
	}
	return r, close, nil
}
