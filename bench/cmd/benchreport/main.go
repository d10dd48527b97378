// Command benchreport measures trawl's vector kernels and shard scan
// against gonum, vek, a plain Go loop and a plain memory read, all in one
// run, and writes the medians and ratios to KERNELS.md and a chart to
// KERNELS.png.
//
// Every measurement is repeated in rounds; within a round each case runs
// right after the baseline it is compared with, so a ratio compares numbers
// taken under the same load. Tables show the median over rounds, and
// ratios are the median of the per-round ratios.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trawl-search/trawl/bench"
	"github.com/trawl-search/trawl/internal/threadclock"
	"github.com/trawl-search/trawl/vector"
)

var (
	rounds  = flag.Int("rounds", 5, "repetitions of every measurement")
	minTime = flag.Duration("time", 200*time.Millisecond, "minimum time of one measurement")
	bigRows = flag.Int("rows", 65536, "rows of the out-of-cache corpus (1536-D, 6 KiB each)")
	mdPath  = flag.String("md", "KERNELS.md", "where to write the table")
	pngPath = flag.String("png", "KERNELS.png", "where to write the chart")
	clock   = flag.String("clock", "thread", "time one-core cases by the thread's CPU time (thread) or by wall time (wall)")
)

var (
	sink  float32
	usink uint64
)

// nsPerOp runs f (which does ops operations) until minTime has passed and
// it ran at least twice, after one warm-up call, and returns ns per op of
// wall time.
func nsPerOp(ops int, f func()) float64 {
	f()
	n := 0
	start := time.Now()
	for n < 2 || time.Since(start) < *minTime {
		f()
		n++
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n*ops)
}

// cpuNsPerOp is nsPerOp for single-threaded work, timed by the thread's
// CPU time when -clock=thread and the OS has it.
func cpuNsPerOp(ops int, f func()) float64 {
	if *clock != "thread" {
		return nsPerOp(ops, f)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f()
	start, ok := threadclock.Now()
	if !ok {
		return nsPerOp(ops, f)
	}
	n := 0
	for {
		f()
		n++
		now, _ := threadclock.Now()
		if n >= 2 && now-start >= *minTime {
			return float64((now - start).Nanoseconds()) / float64(n*ops)
		}
	}
}

// series collects one case's value per round.
type series []float64

func (s series) median() float64 {
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c) == 0 {
		return 0
	}
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// ratio is the median over rounds of a[i]/b[i].
func ratio(a, b series) float64 {
	r := make(series, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return r.median()
}

type result struct {
	dot       map[string]series // ns per Dot 1536
	dotOrder  []string
	l2        map[string]series // ns per L2Squared 1536
	corpora   []corpusResult
	batch     map[int]series // vq/s, one core, big corpus
	batchAll  map[int]series // vq/s, all cores, big corpus
	readAll   series         // GB/s, all cores, big corpus
	topk      map[int]series // ns per candidate
	kernel    string
	procs     int
	loadStart string
	int8      *int8Result
}

type corpusResult struct {
	name       string
	rows       int
	read, scan series // GB/s on one core
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	best, err := vector.Select("")
	if err != nil {
		log.Fatal(err)
	}
	res := &result{
		dot: map[string]series{}, l2: map[string]series{},
		batch: map[int]series{}, batchAll: map[int]series{}, topk: map[int]series{},
		kernel: best.Name, procs: runtime.NumCPU(), loadStart: loadAvg(),
	}

	x, y := bench.Vectors(bench.Dim)
	type impl struct {
		name string
		fn   func(a, b []float32) float32
	}
	impls := []impl{{"plain loop", bench.PlainDot}, {"gonum blas32", bench.GonumDot}, {"vek32", bench.VekDot}}
	for _, k := range vector.Available() {
		impls = append(impls, impl{"trawl " + k.Name, k.Dot})
	}
	for _, im := range impls {
		res.dotOrder = append(res.dotOrder, im.name)
	}

	log.Printf("building corpora (%d rows out of cache)", *bigRows)
	corpora := []struct {
		name string
		rows vector.Rows
	}{
		{"in L2 (128 rows, 0.75 MiB)", bench.Corpus(128)},
		{"in L3 (2048 rows, 12 MiB)", bench.Corpus(2048)},
		{fmt.Sprintf("out of cache (%d rows, %d MiB)", *bigRows, *bigRows*bench.Dim*4>>20), bench.Corpus(*bigRows)},
	}
	big := corpora[len(corpora)-1].rows
	res.corpora = make([]corpusResult, len(corpora))
	for i, c := range corpora {
		res.corpora[i] = corpusResult{name: c.name, rows: c.rows.Len()}
	}
	scores := bench.Scores(1 << 16)
	ids := make([]string, len(scores))
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	ctx := context.Background()
	scan := func(rows vector.Rows, qs []vector.Query) func() {
		return func() {
			if _, err := best.Scan(ctx, vector.Cosine, rows, qs); err != nil {
				log.Fatal(err)
			}
		}
	}
	batches := []int{1, 8, 32}
	queries := map[int][]vector.Query{}
	for _, b := range batches {
		queries[b] = bench.Queries(b, 10)
	}

	ib := newInt8Bench(best)
	res.int8 = ib.res

	for r := range *rounds {
		log.Printf("round %d of %d", r+1, *rounds)
		ib.round(res.procs)
		runtime.GOMAXPROCS(1) // per-core numbers: Scan uses one worker

		for _, im := range impls {
			res.dot[im.name] = append(res.dot[im.name], cpuNsPerOp(1000, func() {
				for range 1000 {
					sink = im.fn(x, y)
				}
			}))
		}
		for _, k := range vector.Available() {
			res.l2[k.Name] = append(res.l2[k.Name], cpuNsPerOp(1000, func() {
				for range 1000 {
					sink = k.L2Squared(x, y)
				}
			}))
		}

		for i, c := range corpora {
			gb := float64(len(bench.Floats(c.rows))*4) / 1e9
			passes := max(1, (64<<20)/(len(bench.Floats(c.rows))*4)) // ~64 MiB a call
			read := cpuNsPerOp(passes, func() {
				for range passes {
					usink += bench.ReadSum(bench.Floats(c.rows))
				}
			})
			sc := cpuNsPerOp(passes, func() {
				for range passes {
					scan(c.rows, queries[1])()
				}
			})
			res.corpora[i].read = append(res.corpora[i].read, gb/read*1e9)
			res.corpora[i].scan = append(res.corpora[i].scan, gb/sc*1e9)
		}

		for _, b := range batches {
			ns := cpuNsPerOp(1, scan(big, queries[b]))
			res.batch[b] = append(res.batch[b], float64(big.Len()*b)/ns*1e9)
		}

		for _, k := range []int{10, 100, 1000} {
			t := vector.NewTopK(k, ids)
			ns := cpuNsPerOp(len(scores), func() {
				t.Reset(ids)
				bench.SelectTopK(t, scores)
			})
			res.topk[k] = append(res.topk[k], ns)
		}

		runtime.GOMAXPROCS(res.procs)
		gb := float64(len(bench.Floats(big))*4) / 1e9
		res.readAll = append(res.readAll, gb/nsPerOp(1, func() { parallelRead(bench.Floats(big), res.procs) })*1e9)
		for _, b := range batches {
			ns := nsPerOp(1, scan(big, queries[b]))
			res.batchAll[b] = append(res.batchAll[b], float64(big.Len()*b)/ns*1e9)
		}
	}

	md := res.markdown()
	if err := os.WriteFile(*mdPath, []byte(md), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := res.chart(*pngPath); err != nil {
		log.Fatal(err)
	}
	fmt.Print(md)
}

// parallelRead reads v on procs goroutines, one slice each.
func parallelRead(v []float32, procs int) {
	var wg sync.WaitGroup
	per := (len(v)/procs + 15) &^ 15
	sums := make([]uint64, procs)
	for p := range procs {
		lo, hi := min(p*per, len(v)), min((p+1)*per, len(v))
		wg.Go(func() { sums[p] = bench.ReadSum(v[lo:hi]) })
	}
	wg.Wait()
	for _, s := range sums {
		usink += s
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuInfo describes the machine from /proc and /sys, where Linux has them.
func cpuInfo() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	l3 := "?"
	if b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index3/size"); err == nil {
		l3 = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s, %d logical CPUs, L3 %s, %s/%s", model, runtime.NumCPU(), l3, runtime.GOOS, runtime.GOARCH)
}
