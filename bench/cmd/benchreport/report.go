package main

import (
	"fmt"
	"image/color"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/trawl-search/trawl/vector/quant"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func (r *result) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# vector benchmarks\n\n")
	p("Written by `go run ./cmd/benchreport` in `bench/` on %s: %s, %s, best kernel `%s`.\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), cpuInfo(), runtime.Version(), r.kernel)
	p("Medians of %d rounds of at least %v each; a ratio is the median of the per-round ratios, each\n", *rounds, *minTime)
	p("between numbers taken back to back. Load average at start %s, at end %s (other work on\n", r.loadStart, loadAvg())
	p("the machine makes single numbers noisy; ratios much less so). One-core cases are timed by\n")
	p("the %s clock (thread: the thread's CPU time, so time spent descheduled is not counted); the\n", *clock)
	p("all-core cases by wall time.\n\n")

	plain, vek := r.dot["plain loop"], r.dot["vek32"]
	p("## Dot product, 1536 floats (64-byte aligned, in L1)\n\n")
	p("| implementation | ns/op | GB/s | × plain loop | × vek32 | × gonum |\n|---|---:|---:|---:|---:|---:|\n")
	for _, name := range r.dotOrder {
		s := r.dot[name]
		p("| %s | %.1f | %.0f | %.1f | %.2f | %.2f |\n", name, s.median(), 2*4*1536/s.median(),
			ratio(plain, s), ratio(vek, s), ratio(r.dot["gonum blas32"], s))
	}
	p("\n## Squared L2, 1536 floats\n\n| kernel | ns/op |\n|---|---:|\n")
	for _, name := range r.dotOrder {
		if k, ok := strings.CutPrefix(name, "trawl "); ok {
			p("| %s | %.1f |\n", k, r.l2[k].median())
		}
	}

	p("\n## Scan, batch 1, one core, against a plain read of the same bytes\n\n")
	p("Cosine top-10 over unit rows of 1536 floats; the read sums the same bytes as 64-bit words.\n\n")
	p("| corpus | read GB/s | scan GB/s | scan Mvectors/s | scan / read |\n|---|---:|---:|---:|---:|\n")
	for _, c := range r.corpora {
		p("| %s | %.1f | %.1f | %.2f | %.0f%% |\n", c.name, c.read.median(), c.scan.median(),
			c.scan.median()*1e9/(1536*4)/1e6, 100*ratio(c.scan, c.read))
	}

	big := r.corpora[len(r.corpora)-1]
	p("\n## Batch scan, %s\n\n", big.name)
	p("| batch | one core Mvq/s | × batch 1 | %d cores Mvq/s | × batch 1 |\n|---:|---:|---:|---:|---:|\n", r.procs)
	for _, bt := range []int{1, 8, 32} {
		p("| %d | %.2f | %.1f | %.2f | %.1f |\n", bt, r.batch[bt].median()/1e6, ratio(r.batch[bt], r.batch[1]),
			r.batchAll[bt].median()/1e6, ratio(r.batchAll[bt], r.batchAll[1]))
	}
	p("\nvq/s: vector-query pairs scored per second. On %d cores a plain read runs at %.1f GB/s and a\n", r.procs, r.readAll.median())
	p("batch-1 scan at %.1f GB/s (%.0f%%).\n", r.batchAll[1].median()*1536*4/1e9, 100*ratio(scaled(r.batchAll[1], 1536*4/1e9), r.readAll))

	p("\n## Top-k selection, per candidate\n\n65 536 random scores offered as a scan offers them (threshold test, then push).\n\n")
	p("| k | ns/candidate |\n|---:|---:|\n")
	for _, k := range []int{10, 100, 1000} {
		p("| %d | %.2f |\n", k, r.topk[k].median())
	}

	r.int8.markdown(&b, r.procs)

	best := r.dot["trawl "+r.kernel]
	checks := []struct {
		name string
		got  string
		ok   bool
	}{
		{"Dot 1536 ≥ 25× the plain loop", fmt.Sprintf("%.1f×", ratio(plain, best)), ratio(plain, best) >= 25},
		{"Dot 1536 ≥ 1.5× faster than vek32", fmt.Sprintf("%.2f×", ratio(vek, best)), ratio(vek, best) >= 1.5},
		{"scan out of cache, batch 1 ≥ 75% of a plain read (stretch 85%)", fmt.Sprintf("%.0f%%", 100*ratio(big.scan, big.read)), ratio(big.scan, big.read) >= 0.75},
		{"batch 32 ≥ 6× the vq/s of batch 1 (one core)", fmt.Sprintf("%.1f×", ratio(r.batch[32], r.batch[1])), ratio(r.batch[32], r.batch[1]) >= 6},
		{"top-k ≤ 3 ns/candidate for k ≤ 100", fmt.Sprintf("%.2f ns", max(r.topk[10].median(), r.topk[100].median())), max(r.topk[10].median(), r.topk[100].median()) <= 3},
		{"int8 batch 1 out of cache ≥ 3× float32 (one core)", fmt.Sprintf("%.2f×", ratio(r.int8.b1Q, r.int8.b1F)), ratio(r.int8.b1Q, r.int8.b1F) >= 3},
		{"int8 batch 32 ≥ 2× float32 (one core)", fmt.Sprintf("%.2f×", ratio(r.int8.b32Q, r.int8.b32F)), ratio(r.int8.b32Q, r.int8.b32F) >= 2},
		{fmt.Sprintf("int8 recall@1, @10 and @100 ≥ 0.99 at oversample %d on every corpus", quant.DefaultOversample), fmt.Sprintf("%.4f", r.int8.minRecall()), r.int8.minRecall() >= 0.99},
	}
	p("\n## Targets\n\n| target | this run | met |\n|---|---:|:---:|\n")
	for _, c := range checks {
		mark := "no"
		if c.ok {
			mark = "yes"
		}
		p("| %s | %s | %s |\n", c.name, c.got, mark)
	}
	return b.String()
}

func scaled(s series, f float64) series {
	out := make(series, len(s))
	for i, v := range s {
		out[i] = v * f
	}
	return out
}

// chart draws two rows of three panels: Dot speed-up over the plain loop,
// read vs scan bandwidth per corpus, and batch throughput; then the int8
// scan's recall and speed over oversample and its throughput against
// float32.
func (r *result) chart(path string) error {
	const w, h = 15 * vg.Inch, 5 * vg.Inch
	var plots []*plot.Plot

	dot := plot.New()
	dot.Title.Text = "Dot 1536: speed-up over plain Go loop"
	dot.Y.Label.Text = "× plain loop (median)"
	var vals plotter.Values
	var names []string
	for _, name := range r.dotOrder {
		vals = append(vals, ratio(r.dot["plain loop"], r.dot[name]))
		names = append(names, strings.TrimPrefix(name, "trawl "))
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(22))
	if err != nil {
		return err
	}
	bars.Color = color.RGBA{R: 66, G: 133, B: 244, A: 255}
	dot.Add(bars)
	dot.NominalX(names...)
	plots = append(plots, dot)

	bw := plot.New()
	bw.Title.Text = "One core, batch 1: GB/s"
	bw.Y.Label.Text = "GB/s (median)"
	var read, scan plotter.Values
	var cn []string
	for _, c := range r.corpora {
		read = append(read, c.read.median())
		scan = append(scan, c.scan.median())
		cn = append(cn, strings.SplitN(c.name, " (", 2)[0])
	}
	rb, err := plotter.NewBarChart(read, vg.Points(20))
	if err != nil {
		return err
	}
	rb.Color = color.Gray{Y: 150}
	rb.Offset = -vg.Points(10)
	sb, err := plotter.NewBarChart(scan, vg.Points(20))
	if err != nil {
		return err
	}
	sb.Color = color.RGBA{R: 219, G: 68, B: 55, A: 255}
	sb.Offset = vg.Points(10)
	bw.Add(rb, sb)
	bw.Legend.Add("plain read", rb)
	bw.Legend.Add("scan", sb)
	bw.Legend.Top = true
	bw.NominalX(cn...)
	plots = append(plots, bw)

	bt := plot.New()
	bt.Title.Text = "Out-of-cache scan: M vector-queries/s"
	bt.Y.Label.Text = "M vq/s (median)"
	var one, all plotter.Values
	for _, b := range []int{1, 8, 32} {
		one = append(one, r.batch[b].median()/1e6)
		all = append(all, r.batchAll[b].median()/1e6)
	}
	ob, err := plotter.NewBarChart(one, vg.Points(20))
	if err != nil {
		return err
	}
	ob.Color = color.RGBA{R: 244, G: 180, B: 0, A: 255}
	ob.Offset = -vg.Points(10)
	ab, err := plotter.NewBarChart(all, vg.Points(20))
	if err != nil {
		return err
	}
	ab.Color = color.RGBA{R: 15, G: 157, B: 88, A: 255}
	ab.Offset = vg.Points(10)
	bt.Add(ob, ab)
	bt.Legend.Add("1 core", ob)
	bt.Legend.Add(fmt.Sprintf("%d cores", r.procs), ab)
	bt.Legend.Top = true
	bt.Legend.Left = true
	bt.NominalX("batch 1", "batch 8", "batch 32")
	plots = append(plots, bt)

	q, err := r.int8.charts()
	if err != nil {
		return err
	}
	img := vgimg.New(w, 2*h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: len(plots), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := [][]*plot.Plot{plots, q}
	canvases := plot.Align(grid, tiles, dc)
	for i, row := range grid {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
