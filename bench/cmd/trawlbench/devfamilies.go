package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard/client"
)

// The families below run over `trawlbench devshards` children: shards
// in one process (internal/devcluster, the shard package's own servers in
// raft groups of one, behind fault proxies), seeded with the dev corpus,
// whose payloads the filter family needs; a separate `router serve`
// process routes to them, so its CPU is its own.

// widthCell is the router overhead over one shard count.
type widthCell struct {
	shards, docs int
	loadAvg      string
	rounds       []overheadRound // b64 CPU only
}

// kindCell is the healthy scenario over one kind of scan.
type kindCell struct {
	name, what string
	share      float64 // filter: the share of the corpus it keeps
	loadAvg    string
	runs       []loadgen.Summary
	recall     float64 // recall@10 against exact:true, -1 when not measured
}

// tlsRound is one restart of a router over TLS shards.
type tlsRound struct {
	first, steady loadgen.Summary
	firstQuery    time.Duration
}

// Filters of the kind family: the dev corpus's lang is en with odds 2/6
// and each of de, fr, es, ja 1/6; year is uniform over 2000..2025.
var (
	filter1  = json.RawMessage(`{"must":[{"key":"lang","match":{"value":"ja"}},{"key":"year","range":{"gte":2024}}]}`) // 1/6 × 2/26 ≈ 1.3 %
	filter10 = json.RawMessage(`{"must":[{"key":"lang","match":{"value":"de"}},{"key":"year","range":{"lte":2015}}]}`) // 1/6 × 16/26 ≈ 10.3 %
)

// devFamilies runs the fan-out-width overhead (3 and 32 shards), the
// scan kinds (flat, int8, IVF, filtered) and the TLS restart.
func (e *env) devFamilies(ctx context.Context, res *results) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir := filepath.Join(e.work, "dev")
	// Every cluster of the dev families, by name; the families ask for
	// them by name, in this order.
	devArgs := func(shards int, extra ...string) []string {
		return append([]string{"-shards", strconv.Itoa(shards), "-docs", strconv.Itoa(e.devDocs), "-dim", strconv.Itoa(e.dim)}, extra...)
	}
	var names []string
	specs := map[string][]string{}
	add := func(name string, args []string) { names, specs[name] = append(names, name), args }
	for _, n := range e.widths {
		add(fmt.Sprintf("dev-%d", n), devArgs(n))
	}
	// Both train their int8 scale at ivfMinRows (its default, 1000 rows a
	// shard, is more than a quick shard holds: a shard that never trains
	// scans float32).
	add("kind-int8", devArgs(3, "-quantization", "int8", "-int8-min-rows", strconv.Itoa(e.ivfMinRows)))
	add("kind-ivf", devArgs(3, "-index", "ivf", "-ivf-min-rows", strconv.Itoa(e.ivfMinRows), "-int8-min-rows", strconv.Itoa(e.ivfMinRows)))
	add("tls", devArgs(3, "-tls-dir", filepath.Join(e.work, "dev", "pki")))
	launch := func(name string) (*cluster.DevShards, error) {
		t0 := time.Now()
		d, err := cluster.StartDev(ctx, &e.ports, self, e.bin, dir, name, specs[name]...)
		if err == nil {
			e.logf("%s: up and seeded in %s", name, time.Since(t0).Round(time.Millisecond))
		}
		return d, err
	}
	// A quick run starts them all at once (one by one, their starts were
	// a fifth of its time); a full one starts each when it is needed, so
	// nothing else runs beside the cluster measured.
	started := map[string]*cluster.DevShards{}
	defer func() {
		for _, d := range started {
			d.Close()
		}
	}()
	if e.quick {
		ds, ok, err := startAll(len(names), func(i int) (*cluster.DevShards, error) { return launch(names[i]) })
		for i, n := range names {
			if ok[i] {
				started[n] = ds[i]
			}
		}
		if err != nil {
			return err
		}
	}
	// start hands the named cluster to its family, which closes it.
	start := func(name string) (*cluster.DevShards, error) {
		if d, ok := started[name]; ok {
			delete(started, name)
			return d, nil
		}
		return launch(name)
	}
	// The 3-shard cluster of the width family is the flat cluster of the
	// kind family too: one seeding fewer.
	var flat *cluster.DevShards
	defer func() {
		if flat != nil {
			flat.Close()
		}
	}()
	for _, n := range e.widths {
		d, err := start(fmt.Sprintf("dev-%d", n))
		if err != nil {
			return err
		}
		cell, err := e.widthCell(ctx, d, n)
		if n == 3 && flat == nil {
			flat = d
		} else {
			d.Close()
		}
		if err != nil {
			return err
		}
		res.widths = append(res.widths, cell)
	}
	if err := e.kindFamily(ctx, res, start, flat); err != nil {
		return err
	}
	if flat != nil {
		flat.Close()
		flat = nil
	}
	return e.tlsFamily(ctx, res, start)
}

func (e *env) widthCell(ctx context.Context, d *cluster.DevShards, n int) (widthCell, error) {
	cell := widthCell{shards: n, docs: e.devDocs, loadAvg: machine.LoadAvg()}
	r, err := d.StartRouter(ctx, fmt.Sprintf("width-%d-router", n))
	if err != nil {
		return cell, err
	}
	// Gone before the next family routes to the same shards.
	defer r.Kill()
	conns := make([]*client.Conn, len(d.Spec.Shards))
	for i, s := range d.Spec.Shards {
		cn, err := client.Dial(s.Addrs[0], client.DialConfig{})
		if err != nil {
			return cell, err
		}
		defer cn.Close()
		conns[i] = cn
	}
	t := e.target(r)
	t.NoMetrics = true
	if _, err := loadgen.Closed(ctx, t, e.queries, 2, e.warm); err != nil {
		return cell, err
	}
	idle, err := idleCPU(ctx, r.PID(), e.idle)
	if err != nil {
		return cell, err
	}
	for range e.devRounds {
		var o overheadRound
		if o.router, o.direct, o.pair50, o.pair99, err = e.interleavedFor(ctx, t, conns, e.devPhase); err != nil {
			return cell, err
		}
		if o.b64, o.cpuB64, err = cpuPerQuery(ctx, r.PID(), idle, func() (loadgen.Summary, error) {
			return loadgen.Closed(ctx, t, e.queries, 4, e.devPhase)
		}); err != nil {
			return cell, err
		}
		cell.rounds = append(cell.rounds, o)
		e.logf("width %d: router p50 %s, direct p50 %s, per-query difference p50 %s p99 %s, CPU/query %s", n,
			o.router.Latency.P50, o.direct.Latency.P50, o.pair50, o.pair99, o.cpuB64)
	}
	return cell, nil
}

// kindFamily runs the healthy open-loop scenario, at the main scenarios'
// offered load, over flat, int8 and IVF shards and with two filters (on
// the flat shards).
func (e *env) kindFamily(ctx context.Context, res *results, start func(string) (*cluster.DevShards, error), flat *cluster.DevShards) error {
	res.kindRate = e.latFactor * res.capacity
	type kind struct {
		name, what string
		filter     json.RawMessage
		recall     bool
	}
	clusters := []struct {
		name  string
		kinds []kind
	}{
		{"flat", []kind{
			{"flat", "float32 rows, exact scan (the reference)", nil, false},
			{"filter ~1 %", "flat shards, `lang = ja and year ≥ 2024`", filter1, false},
			{"filter ~10 %", "flat shards, `lang = de and year ≤ 2015`", filter10, false},
		}},
		{"int8", []kind{
			{"int8", fmt.Sprintf("`--quantization int8` (scale trained once a shard holds %d rows): int8 codes scanned, oversample × k re-scored in float32", e.ivfMinRows), nil, true},
		}},
		{"ivf", []kind{
			{"ivf", fmt.Sprintf("`--index ivf` (int8 scale and centroids trained once a shard holds %d rows), the default nprobe", e.ivfMinRows), nil, true},
		}},
	}
	for _, cl := range clusters {
		err := func() error {
			d := flat
			if cl.name != "flat" || d == nil {
				var err error
				if d, err = start("kind-" + cl.name); err != nil {
					return err
				}
			}
			// Each cluster is gone before the next starts (the flat one
			// too: Close is idempotent, the caller's deferred Close of it
			// then does nothing).
			defer d.Close()
			r, err := d.StartRouter(ctx, "kind-"+cl.name+"-router")
			if err != nil {
				return err
			}
			t := e.target(r)
			for _, k := range cl.kinds {
				cell := kindCell{name: k.name, what: k.what, recall: -1, loadAvg: machine.LoadAvg()}
				q, err := queriesWith(e.queries, k.filter, false)
				if err != nil {
					return err
				}
				if _, err := loadgen.Closed(ctx, t, q, 2, e.warm); err != nil {
					return err
				}
				if k.filter != nil {
					if cell.share, err = filterShare(ctx, r.Base, k.filter); err != nil {
						return err
					}
				}
				if k.recall {
					if cell.recall, err = e.recallAt10(ctx, r.Base); err != nil {
						return err
					}
				}
				for range e.devRounds {
					s, err := loadgen.Open(ctx, t, q, res.kindRate, e.devPhase)
					if err != nil {
						return err
					}
					cell.runs = append(cell.runs, s)
				}
				e.logf("kind %s: p50 %s p99 %s, %.1f complete/s, recall@10 %.3f, share %.4f", k.name,
					cell.runs[0].Latency.P50, cell.runs[0].Latency.P99, cell.runs[0].Goodput(), cell.recall, cell.share)
				res.kinds = append(res.kinds, cell)
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// queriesWith is q's vectors as vector_b64 bodies with a filter and/or
// exact: true added.
func queriesWith(q *loadgen.Queries, filter json.RawMessage, exact bool) (*loadgen.Queries, error) {
	if filter == nil && !exact {
		return q, nil
	}
	out := &loadgen.Queries{Vectors: q.Vectors}
	for _, v := range q.Vectors {
		b, err := json.Marshal(struct {
			VectorB64 string          `json:"vector_b64"`
			K         int             `json:"k"`
			Filter    json.RawMessage `json:"filter,omitempty"`
			Exact     bool            `json:"exact,omitempty"`
		}{base64.StdEncoding.EncodeToString(loadgen.LittleEndian(v)), 10, filter, exact})
		if err != nil {
			return nil, err
		}
		out.Bodies = append(out.Bodies, b)
	}
	return out, nil
}

// post sends body to base+path and decodes the JSON answer into out.
func post(ctx context.Context, url string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// filterShare is the share of the corpus filter keeps, from the Qdrant
// count route (always exact) against an unfiltered count.
func filterShare(ctx context.Context, base string, filter json.RawMessage) (float64, error) {
	count := func(body string) (float64, error) {
		var a struct {
			Result struct {
				Count float64 `json:"count"`
			} `json:"result"`
		}
		err := post(ctx, base+"/collections/trawl/points/count?deadline_ms=10000", []byte(body), &a)
		return a.Result.Count, err
	}
	all, err := count(`{}`)
	if err != nil || all == 0 {
		return 0, err
	}
	kept, err := count(`{"filter":` + string(filter) + `}`)
	return kept / all, err
}

// corpusQueries are 50 queries drawn like the dev corpus the devshards
// hold (devcluster.Corpus, seed 1): stored documents plus Gaussian noise
// of 0.3 of their norm, as the router's IVF benchmark draws them. The
// suite's own queries are random Gaussian vectors, far from the corpus's
// 32 clusters: an index's worst case, not the recall a user sees.
func (e *env) corpusQueries() (*loadgen.Queries, error) {
	docs := devcluster.Corpus(e.devDocs, e.dim, 1)
	rng := rand.New(rand.NewPCG(7, 8))
	q := &loadgen.Queries{}
	for i := range 50 {
		d := docs[i*len(docs)/50].Vector
		var norm float64
		for _, x := range d {
			norm += float64(x) * float64(x)
		}
		sd := 0.3 * math.Sqrt(norm/float64(len(d)))
		v := make([]float32, len(d))
		for j, x := range d {
			v[j] = x + float32(sd*rng.NormFloat64())
		}
		b, err := loadgen.Body(v, 10, loadgen.B64)
		if err != nil {
			return nil, err
		}
		q.Vectors, q.Bodies = append(q.Vectors, v), append(q.Bodies, b)
	}
	return q, nil
}

// recallAt10 is the mean share of the exact top 10 (exact: true) that the
// default scan of the same query finds, over 50 queries drawn like the
// corpus (corpusQueries).
func (e *env) recallAt10(ctx context.Context, base string) (float64, error) {
	near, err := e.corpusQueries()
	if err != nil {
		return 0, err
	}
	exactQ, err := queriesWith(near, nil, true)
	if err != nil {
		return 0, err
	}
	type answer struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
		ScatterGather struct {
			Exact bool `json:"exact"`
		} `json:"scatter_gather"`
	}
	inexact := 0
	url := fmt.Sprintf("%s/v1/search?deadline_ms=%d", base, 10_000)
	var sum float64
	n := len(near.Bodies)
	for i := range n {
		var got, want answer
		if err := post(ctx, url, near.Bodies[i], &got); err != nil {
			return 0, err
		}
		if err := post(ctx, url, exactQ.Bodies[i], &want); err != nil {
			return 0, err
		}
		if !got.ScatterGather.Exact {
			inexact++
		}
		ids := map[string]bool{}
		for _, it := range got.Items {
			ids[it.ID] = true
		}
		hit := 0
		for _, it := range want.Items {
			if ids[it.ID] {
				hit++
			}
		}
		if len(want.Items) > 0 {
			sum += float64(hit) / float64(len(want.Items))
		}
	}
	// Every answer exact: the shards scanned float32 (no int8 scale or
	// index trained), so this would be no recall figure at all.
	if inexact == 0 {
		return 0, fmt.Errorf("recall: every default answer of %s was exact: the shards scan float32", base)
	}
	return sum / float64(n), nil
}

// tlsFamily restarts a router over TLS shards and times its first
// queries, one client, one after another, against the next as many.
func (e *env) tlsFamily(ctx context.Context, res *results, start func(string) (*cluster.DevShards, error)) error {
	d, err := start("tls")
	if err != nil {
		return err
	}
	defer d.Close()
	r, err := d.StartRouter(ctx, "tls-router")
	if err != nil {
		return err
	}
	res.loadAt["tls"] = machine.LoadAvg()
	t := e.target(r)
	const n = 100
	seq := func(hc *http.Client, from int) (loadgen.Summary, time.Duration) {
		tally := loadgen.NewTally()
		var took, first time.Duration
		url := fmt.Sprintf("%s/v1/search?deadline_ms=%d", t.Base, t.DeadlineMS)
		hdr := http.Header{"Content-Type": []string{"application/json"}}
		for i := range n {
			o, code, d := loadgen.Do(hc, url, hdr, e.queries.Bodies[(from+i)%len(e.queries.Bodies)])
			tally.Add(o, code, d)
			took += d
			if i == 0 {
				first = d
			}
		}
		return tally.Summarise(fmt.Sprintf("%d sequential", n), took), first
	}
	for round := range e.devRounds {
		r.Kill()
		if err := r.Restart(ctx); err != nil {
			return err
		}
		hc := &http.Client{Timeout: 10 * time.Second}
		var tr tlsRound
		tr.first, tr.firstQuery = seq(hc, round*n)
		tr.steady, _ = seq(hc, round*n+n)
		hc.CloseIdleConnections()
		res.tls = append(res.tls, tr)
		e.logf("tls restart %d: first query %s, first %d p50 %s p99 %s, next %d p50 %s p99 %s", round, tr.firstQuery,
			n, tr.first.Latency.P50, tr.first.Latency.P99, n, tr.steady.Latency.P50, tr.steady.Latency.P99)
	}
	return nil
}
