package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
)

// statusRates is what /cluster/status says about scan rates.
type statusRates struct {
	ShardBudgetMS int64 `json:"shard_budget_ms"`
	Dimension     int   `json:"dimension"`
	Shards        []struct {
		Name     string `json:"name"`
		Replicas []struct {
			Addr              string  `json:"addr"`
			Kernel            string  `json:"kernel"`
			ScanRate          float64 `json:"scan_rate"`
			ScanRateLive      float64 `json:"scan_rate_live"`
			MaxRowsInDeadline uint64  `json:"max_rows_in_deadline"`
		} `json:"replicas"`
	} `json:"shards"`
}

// readRates reads the router's /cluster/status.
func readRates(ctx context.Context, r *cluster.Router) (statusRates, error) {
	var st statusRates
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.Base+"/cluster/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func (r *results) writeRates(w func(string, ...any)) {
	w("## Measured scan rate (`/cluster/status`)\n\n")
	w("Every `router shard` measures its kernel at start (one core, a scratch buffer of its dimension at least twice the last-level cache, " +
		"in the background while it loads) and reports it; `/cluster/status` shows it per replica with `max_rows_in_deadline`, the rows " +
		"one core scans within the router's default per-shard budget (`shard_budget_ms`), and the running rate of real one-query scans. " +
		"Read from the main cluster's trawl router after the capacity runs, under the load the other families left.\n\n")
	w("| shard | replica | kernel | scan_rate (1536-D rows/s/core) | scan_rate_live | max_rows_in_deadline (%d ms) |\n|---|---|---|---:|---:|---:|\n", r.rates.ShardBudgetMS)
	for _, s := range r.rates.Shards {
		for _, rep := range s.Replicas {
			w("| %s | %s | %s | %.0f | %.0f | %d |\n", s.Name, rep.Addr, rep.Kernel, rep.ScanRate, rep.ScanRateLive, rep.MaxRowsInDeadline)
		}
	}
	w("\n")
}

func (r *results) writeWidths(w func(string, ...any), ms func(float64) string) {
	if len(r.widths) == 0 {
		return
	}
	w("## Router overhead against fan-out width (in-process shards)\n\n")
	w("32 `router shard` processes on 2 cores would measure oversubscription, so here every shard count runs its shards inside one " +
		"`trawlbench devshards` process (internal/devcluster: the shard package's servers, raft groups of one, each behind a fault proxy, " +
		"the dev corpus with payloads) and a separate `router serve` routes to them; 3 shards run the same way, so the two rows compare. " +
		"The measurement is the one above: one client alternating the router with a direct gRPC search of every shard (timed to the slowest), " +
		"and router CPU per query (`/proc/<pid>/stat`, less idle) over 4 closed-loop clients, `vector_b64`.\n\n")
	w("| shards | docs | load avg | router p50 ms | router p99 ms | direct (slowest shard) p50 ms | direct p99 ms | **added p50 ms** | **added p99 ms** | router CPU µs/query | p50 ms (4 clients) |\n")
	w("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.widths {
		var rp50, rp99, dp50, dp99, pp50, pp99, cpu, cp50 []float64
		for _, o := range c.rounds {
			rp50, rp99 = append(rp50, p50(o.router)), append(rp99, p99(o.router))
			dp50, dp99 = append(dp50, p50(o.direct)), append(dp99, p99(o.direct))
			pp50, pp99 = append(pp50, msOf(o.pair50)), append(pp99, msOf(o.pair99))
			cpu, cp50 = append(cpu, float64(o.cpuB64)/1e3), append(cp50, p50(o.b64))
		}
		w("| %d | %d | %s | %s | %s | %s | %s | **%.2f** | **%.2f** | %.0f | %s |\n", c.shards, c.docs, c.loadAvg,
			ms(median(rp50)), ms(median(rp99)), ms(median(dp50)), ms(median(dp99)), median(pp50), median(pp99), median(cpu), ms(median(cp50)))
	}
	w("\n*Added* is the per-query difference router − direct (the same query both ways, back to back), its p50 and p99, median over rounds.\n\n")
}

func (r *results) writeKinds(w func(string, ...any), ms func(float64) string) {
	if len(r.kinds) == 0 {
		return
	}
	w("## Scan kinds and filters: the healthy scenario (in-process shards)\n\n")
	w("trawl's router alone, open loop at the healthy scenario's offered load (%.1f queries/s), over 3 in-process shards of one replica "+
		"(`trawlbench devshards`, the dev corpus: %d clustered vectors with payloads `lang`, `year`, `tags`). int8 and IVF shards are "+
		"started with the shard package's `--quantization int8` and `--index ivf` settings. Recall@10 is the share of the exact top 10 "+
		"(the same query with `\"exact\": true`) that the default scan returns, over 50 queries drawn like the corpus (stored documents plus noise of 0.3 of their "+
		"norm; the load runs use the suite's random Gaussian queries, far from the corpus's clusters); a filter's share is the corpus it keeps "+
		"(the count route, against all documents).\n\n", r.kindRate, r.devDocs)
	w("| kind | what | load avg | complete/s | p50 ms | p90 ms | p99 ms | max ms | degraded %% | recall@10 | filter keeps |\n")
	w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.kinds {
		rec, share := "", ""
		if c.recall >= 0 {
			rec = fmt.Sprintf("%.3f", c.recall)
		}
		if c.share > 0 {
			share = fmt.Sprintf("%.1f %%", 100*c.share)
		}
		w("| %s | %s | %s | %.1f | %s | %s | %s | %s | %.1f | %s | %s |\n", c.name, c.what, c.loadAvg, med(c.runs, goodput),
			ms(med(c.runs, p50)), ms(med(c.runs, p90)), ms(med(c.runs, p99)), ms(med(c.runs, pmax)), med(c.runs, degr), rec, share)
	}
	w("\n")
}

func (r *results) writeTLS(w func(string, ...any), ms func(float64) string) {
	if len(r.tls) == 0 {
		return
	}
	w("## Router restarted with inter-node TLS\n\n")
	w("3 in-process shards serving gRPC over TLS (a throwaway CA, `router serve --tls-ca`); the router is SIGKILLed and started again, "+
		"and once `/readyz` answers (with TLS it waits for every replica's handshake) one client sends 100 queries one after another, "+
		"then 100 more (steady state), on a new HTTP connection each restart; `?deadline_ms=%d`. Load average %s.\n\n", r.deadlineMS, r.loadAt["tls"])
	w("| restart | first query ms | first 100: p50 ms | p99 ms | max ms | degraded %% | next 100: p50 ms | p99 ms | max ms | degraded %% |\n")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, t := range r.tls {
		w("| %d | %s | %s | %s | %s | %.1f | %s | %s | %s | %.1f |\n", i+1, ms(msOf(t.firstQuery)),
			ms(p50(t.first)), ms(p99(t.first)), ms(pmax(t.first)), degr(t.first),
			ms(p50(t.steady)), ms(p99(t.steady)), ms(pmax(t.steady)), degr(t.steady))
	}
	w("\n")
}
