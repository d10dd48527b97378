package main

import (
	"context"
	"flag"
	"fmt"
	"image/color"
	"log"
	"math/rand/v2"
	"runtime"
	"strings"

	"github.com/trawl-search/trawl/bench"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var (
	int8Rows      = flag.Int("int8-rows", 200000, "rows of the int8-versus-float32 corpus (1536-D: 6 KiB of floats and 1.5 KiB of codes each)")
	clusteredRows = flag.Int("clustered-rows", 50000, "rows of the clustered and the anisotropic corpora the recall curve also runs on")
	recallQueries = flag.Int("recall-queries", 100, "queries per recall measurement")
)

// The oversample curve runs 1..maxCurve.
const maxCurve = 8

// budget is the per-shard budget of the default 50 ms deadline.
const budget = 0.045

// int8Result holds the int8-against-float32 measurements.
type int8Result struct {
	rows       int
	floatBytes int
	codeBytes  int
	kernel     string

	// One core, per round: vectors/s at batch 1, vq/s at batch 32.
	b1F, b1Q, b32F, b32Q series
	// All cores, batch 32, vq/s.
	b32FAll, b32QAll series
	// One core, batch 1, seconds per query at oversample 1..maxCurve.
	curve [maxCurve + 1]series
	// ns per re-scored row, candidates at random rows of the corpus.
	rescore series

	// Recall is deterministic, measured once: recall@10 per corpus and
	// oversample, recall@1 and @100 at the default, and per-shard scales.
	corpora   []string
	recall10  map[string][maxCurve + 1]float64
	recallK   map[string]map[int]float64
	perShard1 map[string]float64 // recall@10 at oversample 1 with a per-shard scale
	perDim1   map[string]float64
}

// int8Bench prepares the int8 corpora and measures recall; measure then
// runs one round of timings.
type int8Bench struct {
	res    *int8Result
	rows   vector.Rows
	codes  *quant.Codes
	k      quant.Kernel
	f      vector.Kernel
	q1     []vector.Query
	q32    []vector.Query
	cands  [][]int32
	rescQs []vector.Query
}

func newInt8Bench(f vector.Kernel) *int8Bench {
	ctx := context.Background()
	k, _ := quant.Select("")
	log.Printf("int8: building %d rows and their codes", *int8Rows)
	rows := bench.Corpus(*int8Rows)
	scale, err := quant.Train(bench.Floats(rows), rows.Dim, quant.DefaultKind)
	if err != nil {
		log.Fatal(err)
	}
	codes, err := quant.Encode(scale, rows)
	if err != nil {
		log.Fatal(err)
	}
	b := &int8Bench{
		rows: rows, codes: codes, k: k, f: f,
		q1: bench.Queries(1, 10), q32: bench.Queries(32, 10),
		res: &int8Result{
			rows: rows.Len(), floatBytes: len(bench.Floats(rows)) * 4, codeBytes: codes.Bytes(), kernel: k.Name,
			recall10: map[string][maxCurve + 1]float64{}, recallK: map[string]map[int]float64{},
			perShard1: map[string]float64{}, perDim1: map[string]float64{},
		},
	}
	// Re-scoring cost: 40 candidates (k=10 at oversample 4) at random rows.
	r := rand.New(rand.NewPCG(11, 12))
	b.rescQs = bench.Queries(64, 10)
	for range b.rescQs {
		c := make([]int32, 10*quant.DefaultOversample)
		for i := range c {
			c[i] = int32(r.IntN(rows.Len()))
		}
		b.cands = append(b.cands, c)
	}

	crow, cqs := bench.Clustered(*clusteredRows, *recallQueries)
	arow, aqs := bench.Anisotropic(*clusteredRows, *recallQueries)
	gqs := bench.Queries(*recallQueries, 100)
	corpora := []struct {
		name string
		rows vector.Rows
		qs   [][]float32
	}{
		{fmt.Sprintf("clustered, %d rows", crow.Len()), crow, cqs},
		{fmt.Sprintf("gaussian, %d rows", rows.Len()), rows, nil},
		{fmt.Sprintf("anisotropic, %d rows", arow.Len()), arow, aqs},
	}
	for i := range gqs {
		corpora[1].qs = append(corpora[1].qs, gqs[i].Vector)
	}
	for _, c := range corpora {
		log.Printf("int8: recall on %s", c.name)
		b.res.corpora = append(b.res.corpora, c.name)
		queries := func(kk int) []vector.Query {
			qs := make([]vector.Query, len(c.qs))
			for i, v := range c.qs {
				qs[i] = vector.Query{Vector: v, K: kk}
			}
			return qs
		}
		exact100, err := f.Scan(ctx, vector.Cosine, c.rows, queries(100))
		if err != nil {
			log.Fatal(err)
		}
		prefix := func(kk int) [][]vector.Hit {
			out := make([][]vector.Hit, len(exact100))
			for i, h := range exact100 {
				out[i] = h[:min(kk, len(h))]
			}
			return out
		}
		kinds := map[quant.Kind]*quant.Codes{}
		for _, kind := range []quant.Kind{quant.PerDimension, quant.PerShard} {
			s, err := quant.Train(bench.Floats(c.rows), c.rows.Dim, kind)
			if err != nil {
				log.Fatal(err)
			}
			if kinds[kind], err = quant.Encode(s, c.rows); err != nil {
				log.Fatal(err)
			}
		}
		scan := func(codes *quant.Codes, kk, os int) [][]vector.Hit {
			got, err := k.Scan(ctx, f, vector.Cosine, c.rows, codes, queries(kk), os)
			if err != nil {
				log.Fatal(err)
			}
			return got
		}
		var curve [maxCurve + 1]float64
		for os := 1; os <= maxCurve; os++ {
			curve[os] = bench.Recall(prefix(10), scan(kinds[quant.DefaultKind], 10, os))
		}
		b.res.recall10[c.name] = curve
		b.res.perDim1[c.name] = bench.Recall(prefix(10), scan(kinds[quant.PerDimension], 10, 1))
		b.res.perShard1[c.name] = bench.Recall(prefix(10), scan(kinds[quant.PerShard], 10, 1))
		b.res.recallK[c.name] = map[int]float64{}
		for _, kk := range []int{1, 100} {
			b.res.recallK[c.name][kk] = bench.Recall(prefix(kk), scan(kinds[quant.DefaultKind], kk, quant.DefaultOversample))
		}
	}
	return b
}

// round runs one round of timings: one core first, then all cores.
func (b *int8Bench) round(procs int) {
	ctx := context.Background()
	res := b.res
	n := float64(b.rows.Len())
	fscan := func(qs []vector.Query) func() {
		return func() {
			if _, err := b.f.Scan(ctx, vector.Cosine, b.rows, qs); err != nil {
				log.Fatal(err)
			}
		}
	}
	qscan := func(qs []vector.Query, os int) func() {
		return func() {
			if _, err := b.k.Scan(ctx, b.f, vector.Cosine, b.rows, b.codes, qs, os); err != nil {
				log.Fatal(err)
			}
		}
	}
	runtime.GOMAXPROCS(1)
	res.b1F = append(res.b1F, n/cpuNsPerOp(1, fscan(b.q1))*1e9)
	res.b1Q = append(res.b1Q, n/cpuNsPerOp(1, qscan(b.q1, 0))*1e9)
	res.b32F = append(res.b32F, 32*n/cpuNsPerOp(1, fscan(b.q32))*1e9)
	res.b32Q = append(res.b32Q, 32*n/cpuNsPerOp(1, qscan(b.q32, 0))*1e9)
	for os := 1; os <= maxCurve; os++ {
		res.curve[os] = append(res.curve[os], cpuNsPerOp(1, qscan(b.q1, os))/1e9)
	}
	res.rescore = append(res.rescore, cpuNsPerOp(len(b.rescQs)*len(b.cands[0]), func() {
		for i, q := range b.rescQs {
			if _, err := b.f.Rescore(vector.Cosine, b.rows, q, b.cands[i]); err != nil {
				log.Fatal(err)
			}
		}
	}))
	runtime.GOMAXPROCS(procs)
	res.b32FAll = append(res.b32FAll, 32*n/nsPerOp(1, fscan(b.q32))*1e9)
	res.b32QAll = append(res.b32QAll, 32*n/nsPerOp(1, qscan(b.q32, 0))*1e9)
}

func (r *int8Result) markdown(b *strings.Builder, procs int) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## int8 codes with exact re-scoring against the float32 scan\n\n")
	p("%d unit rows of 1536 floats (%d MiB of float32, %d MiB of codes, both past L3); cosine top-10; int8 kernel `%s`,\n",
		r.rows, r.floatBytes>>20, r.codeBytes>>20, r.kernel)
	p("default oversample %d (the int8 scan keeps the best oversample×k rows by code score, then re-scores them in float32,\n", quant.DefaultOversample)
	p("so its times include the re-scoring). %s scale (quant.DefaultKind). Ratios are medians of per-round ratios.\n\n", quant.DefaultKind)
	p("| case | float32 | int8 | int8 / float32 |\n|---|---:|---:|---:|\n")
	p("| batch 1, one core, M vectors/s | %.2f | %.2f | %.2f× |\n", r.b1F.median()/1e6, r.b1Q.median()/1e6, ratio(r.b1Q, r.b1F))
	p("| batch 32, one core, M vq/s | %.2f | %.2f | %.2f× |\n", r.b32F.median()/1e6, r.b32Q.median()/1e6, ratio(r.b32Q, r.b32F))
	p("| batch 32, %d cores, M vq/s | %.2f | %.2f | %.2f× |\n", procs, r.b32FAll.median()/1e6, r.b32QAll.median()/1e6, ratio(r.b32QAll, r.b32FAll))
	p("| largest shard a 45 ms budget covers, one core, batch 1 | %.0f | %.0f | %.2f× |\n", r.b1F.median()*budget, r.b1Q.median()*budget, ratio(r.b1Q, r.b1F))
	p("| the same for a batch of 32 queries | %.0f | %.0f | %.2f× |\n", r.b32F.median()/32*budget, r.b32Q.median()/32*budget, ratio(r.b32Q, r.b32F))
	p("\nOne core batch 1 reads %.1f GB/s of float32 rows and %.1f GB/s of codes.\n", r.b1F.median()*1536*4/1e9, r.b1Q.median()*1536/1e9)

	p("\n### Recall and speed over oversample\n\n")
	p("recall@10 against the exact float32 scan (%d queries not in the corpus); time: one core, batch 1, on the %d-row corpus.\n\n", *recallQueries, r.rows)
	p("| oversample |")
	for _, c := range r.corpora {
		p(" recall@10 %s |", c)
	}
	p(" ms per query | M vectors/s |\n|---:|")
	for range r.corpora {
		p("---:|")
	}
	p("---:|---:|\n")
	for os := 1; os <= maxCurve; os++ {
		p("| %d |", os)
		for _, c := range r.corpora {
			p(" %.4f |", r.recall10[c][os])
		}
		p(" %.2f | %.2f |\n", r.curve[os].median()*1e3, float64(r.rows)/r.curve[os].median()/1e6)
	}
	p("\nAt the default oversample %d: ", quant.DefaultOversample)
	for i, c := range r.corpora {
		if i > 0 {
			p("; ")
		}
		p("%s recall@1 %.4f, recall@100 %.4f", c, r.recallK[c][1], r.recallK[c][100])
	}
	p(".\n\nScale kinds at oversample 1 (where they differ most), recall@10: ")
	for i, c := range r.corpora {
		if i > 0 {
			p("; ")
		}
		p("%s per-dimension %.4f, per-shard %.4f", c, r.perDim1[c], r.perShard1[c])
	}
	p(".\n\nRe-scoring a candidate row read from RAM (random rows of the corpus, one core) costs %.0f ns, so the %d\n", r.rescore.median(), 10*quant.DefaultOversample)
	p("re-scored rows of a top-10 query cost %.1f µs of the %.1f ms its scan takes.\n", r.rescore.median()*float64(10*quant.DefaultOversample)/1e3, r.curve[quant.DefaultOversample].median()*1e3)
}

// int8Charts draws the recall curve and the throughput comparison.
func (r *int8Result) charts() ([]*plot.Plot, error) {
	rc := plot.New()
	rc.Title.Text = "int8 + re-score: recall@10 vs oversample"
	rc.X.Label.Text = "oversample"
	rc.Y.Label.Text = "recall@10"
	colors := []color.Color{color.RGBA{R: 66, G: 133, B: 244, A: 255}, color.RGBA{R: 219, G: 68, B: 55, A: 255}, color.RGBA{R: 15, G: 157, B: 88, A: 255}}
	for i, c := range r.corpora {
		pts := make(plotter.XYs, maxCurve)
		for os := 1; os <= maxCurve; os++ {
			pts[os-1] = plotter.XY{X: float64(os), Y: r.recall10[c][os]}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = colors[i%len(colors)]
		l.Width = vg.Points(2)
		rc.Add(l)
		rc.Legend.Add(c, l)
	}
	rc.Legend.Top = false
	rc.Legend.Left = false

	sp := plot.New()
	sp.Title.Text = "int8 + re-score: one core, batch 1"
	sp.X.Label.Text = "oversample"
	sp.Y.Label.Text = "M vectors/s (median)"
	pts := make(plotter.XYs, maxCurve)
	for os := 1; os <= maxCurve; os++ {
		pts[os-1] = plotter.XY{X: float64(os), Y: float64(r.rows) / r.curve[os].median() / 1e6}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	l.Color = color.RGBA{R: 15, G: 157, B: 88, A: 255}
	l.Width = vg.Points(2)
	flat := plotter.XYs{{X: 1, Y: r.b1F.median() / 1e6}, {X: maxCurve, Y: r.b1F.median() / 1e6}}
	fl, err := plotter.NewLine(flat)
	if err != nil {
		return nil, err
	}
	fl.Color = color.Gray{Y: 120}
	fl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	sp.Add(l, fl)
	sp.Legend.Add("int8", l)
	sp.Legend.Add("float32", fl)
	sp.Y.Min = 0

	bt := plot.New()
	bt.Title.Text = "float32 vs int8, one core: M vq/s"
	bt.Y.Label.Text = "M vq/s (median)"
	fv := plotter.Values{r.b1F.median() / 1e6, r.b32F.median() / 1e6}
	qv := plotter.Values{r.b1Q.median() / 1e6, r.b32Q.median() / 1e6}
	fb, err := plotter.NewBarChart(fv, vg.Points(20))
	if err != nil {
		return nil, err
	}
	fb.Color = color.Gray{Y: 150}
	fb.Offset = -vg.Points(10)
	qb, err := plotter.NewBarChart(qv, vg.Points(20))
	if err != nil {
		return nil, err
	}
	qb.Color = color.RGBA{R: 244, G: 180, B: 0, A: 255}
	qb.Offset = vg.Points(10)
	bt.Add(fb, qb)
	bt.Legend.Add("float32", fb)
	bt.Legend.Add("int8", qb)
	bt.Legend.Top = true
	bt.Legend.Left = true
	bt.NominalX("batch 1", "batch 32")
	return []*plot.Plot{rc, sp, bt}, nil
}

// minRecall is the lowest recall@k at the default oversample over every
// corpus and k.
func (r *int8Result) minRecall() float64 {
	lo := 1.0
	for _, c := range r.corpora {
		lo = min(lo, r.recall10[c][quant.DefaultOversample], r.recallK[c][1], r.recallK[c][100])
	}
	return lo
}
