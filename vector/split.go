package vector

import "sync"

// Scans of at least parallelMinRows rows are split across up to GOMAXPROCS
// goroutines, each given at least minWorkerRows rows: below that, starting
// workers and merging their heaps costs more than it saves.
const (
	parallelMinRows = 16384
	minWorkerRows   = 8192
)

// ScanWorkers is how many goroutines a scan of n rows uses on procs cores.
func ScanWorkers(n, procs int) int {
	if n < parallelMinRows {
		return 1
	}
	return max(1, min(procs, n/minWorkerRows))
}

// SplitRows runs run(w, lo, hi) for each of workers contiguous ranges of
// n rows, concurrently when there is more than one (inline when there is
// one), and returns the first worker's error in worker order. Ranges are
// whole blocks of block rows, so every worker but the last scores full
// blocks. Each worker writes only its own state; the split, not the
// scheduling, decides which rows it gets, so results do not depend on it.
func SplitRows(n, workers, block int, run func(w, lo, hi int) error) error {
	if workers <= 1 {
		return run(0, 0, n)
	}
	per := (n/workers + block - 1) / block * block
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := min(w*per, n), min((w+1)*per, n)
		if w == workers-1 {
			hi = n
		}
		wg.Go(func() { errs[w] = run(w, lo, hi) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
