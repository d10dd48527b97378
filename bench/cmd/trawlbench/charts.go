package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/trawl-search/trawl/bench/internal/loadgen"
)

// chartFiles are the PNGs a report links to, relative to it.
type chartFiles struct{ scenarios, sweep, scale string }

var (
	trawlColor = color.RGBA{R: 219, G: 68, B: 55, A: 255}
	trawlLight = color.RGBA{R: 244, G: 160, B: 150, A: 255}
	baseColor  = color.RGBA{R: 66, G: 133, B: 244, A: 255}
	baseLight  = color.RGBA{R: 160, G: 195, B: 250, A: 255}
)

func (r *results) tag() string {
	q := ""
	if r.quick {
		q = "QUICK, "
	}
	return fmt.Sprintf("(%scommit %s, load avg %s)", q, r.info.Commit, r.loadStart)
}

func (r *results) charts(dir, base string) (chartFiles, error) {
	f := chartFiles{scenarios: base + "-scenarios.png", sweep: base + "-overload.png", scale: base + "-scale.png"}
	sc, err := r.scenarioChart()
	if err != nil {
		return f, err
	}
	if err := savePNG(filepath.Join(dir, f.scenarios), 11*vg.Inch, 5*vg.Inch, sc); err != nil {
		return f, err
	}
	if err := savePNG(filepath.Join(dir, f.sweep), 8*vg.Inch, 5*vg.Inch, r.sweepChart()); err != nil {
		return f, err
	}
	a, b := r.scaleCharts()
	if err := savePNG(filepath.Join(dir, f.scale), 13*vg.Inch, 5*vg.Inch, a, b); err != nil {
		return f, err
	}
	return f, nil
}

// scenarioChart: p50 and p99 per scenario, trawl beside its baseline.
func (r *results) scenarioChart() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Latency per scenario, 3 shards × 3 replicas, %d vectors, open loop %.0f q/s\n%s",
		r.mainRows, r.latFactor*r.capacity, r.tag())
	p.Y.Label.Text = "latency, ms (every round's requests pooled)"
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.name
	}
	const w = 14
	bars := []struct {
		label, router string
		p             int // 50 or 99
		col           color.Color
	}{
		{"trawl p50", trawlName, 50, trawlLight}, {"trawl p99", trawlName, 99, trawlColor},
		{"baseline p50", baseName, 50, baseLight}, {"baseline p99", baseName, 99, baseColor},
	}
	for i, b := range bars {
		var vals plotter.Values
		for _, sc := range scenarios {
			p := loadgen.Pool(r.scenarios[sc.name][b.router])
			if b.p == 50 {
				vals = append(vals, p50(p))
			} else {
				vals = append(vals, p99(p))
			}
		}
		bc, err := plotter.NewBarChart(vals, vg.Points(w))
		if err != nil {
			return nil, err
		}
		bc.Color = b.col
		bc.LineStyle.Width = 0
		bc.Offset = vg.Points(float64(w) * (float64(i) - 1.5))
		p.Add(bc)
		p.Legend.Add(b.label, bc)
	}
	p.Legend.Top = true
	// Head room so the legend does not cover the tallest bars.
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.3
	p.NominalX(names...)
	return p, nil
}

// sweepChart: goodput against offered load, with the ideal line.
func (r *results) sweepChart() *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Complete answers/s against offered load, healthy 3 × 3, %d vectors\n%s", r.mainRows, r.tag())
	p.X.Label.Text = "offered load, queries/s (open loop)"
	p.Y.Label.Text = "complete answers/s (median of rounds)"
	ideal := plotter.XYs{}
	for _, f := range r.factors {
		ideal = append(ideal, plotter.XY{X: f * r.capacity, Y: min(f, 1) * r.capacity})
	}
	il, _ := plotter.NewLine(ideal)
	il.Color = color.Gray{Y: 140}
	il.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(il)
	p.Legend.Add("min(offered, capacity)", il)
	for _, rt := range []struct {
		name string
		col  color.Color
	}{{trawlName, trawlColor}, {baseName, baseColor}} {
		var xy plotter.XYs
		for _, f := range r.factors {
			xy = append(xy, plotter.XY{X: f * r.capacity, Y: med(r.sweep[f][rt.name], goodput)})
		}
		l, pts, _ := plotter.NewLinePoints(xy)
		l.Color, pts.Color = rt.col, rt.col
		p.Add(l, pts)
		p.Legend.Add(rt.name, l, pts)
	}
	p.Legend.Top = true
	return p
}

// scaleCharts: latency against shard count, and against corpus size at
// 3 shards.
func (r *results) scaleCharts() (*plot.Plot, *plot.Plot) {
	mk := func(title, xlabel string, pick func(scaleCell) (float64, bool)) *plot.Plot {
		p := plot.New()
		p.Title.Text = title + "\n" + r.tag()
		p.X.Label.Text = xlabel
		p.Y.Label.Text = "latency, ms, 1 client (median of rounds)"
		for _, s := range []struct {
			label string
			col   color.Color
			f     func(scaleCell) float64
		}{
			{"trawl p50", trawlLight, func(c scaleCell) float64 { return med(c.trawl, p50) }},
			{"trawl p99", trawlColor, func(c scaleCell) float64 { return med(c.trawl, p99) }},
			{"baseline p50", baseLight, func(c scaleCell) float64 { return med(c.base, p50) }},
			{"baseline p99", baseColor, func(c scaleCell) float64 { return med(c.base, p99) }},
		} {
			var xy plotter.XYs
			for _, c := range r.scale {
				if x, ok := pick(c); ok {
					xy = append(xy, plotter.XY{X: x, Y: s.f(c)})
				}
			}
			if len(xy) == 0 {
				continue
			}
			l, pts, _ := plotter.NewLinePoints(xy)
			l.Color, pts.Color = s.col, s.col
			p.Add(l, pts)
			p.Legend.Add(s.label, l, pts)
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.Y.Min = 0
		return p
	}
	shards := mk(fmt.Sprintf("Latency against shard count (groups of one), %d vectors", r.scaleRows), "shards",
		func(c scaleCell) (float64, bool) { return float64(c.shards), c.rows == r.scaleRows })
	sizes := mk("Latency against corpus size, 3 shards of one replica", "vectors in the corpus",
		func(c scaleCell) (float64, bool) { return float64(c.rows), c.shards == 3 })
	return shards, sizes
}

func savePNG(path string, w, h vg.Length, plots ...*plot.Plot) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for j, p := range plots {
		p.Draw(canvases[0][j])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return f.Close()
}
