package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// slotsStatus is one collection in `admin slots`' JSON.
type slotsStatus struct {
	Collection string `json:"collection"`
	// Slots is the collection's slot count, 0 for a collection created
	// before slots (placed by jump hash over the shard list).
	Slots  int               `json:"slots"`
	Epoch  uint64            `json:"epoch"`
	Shards []slotsShardCount `json:"shards"`
}

// slotsShardCount is one shard's part of a collection.
type slotsShardCount struct {
	Shard string `json:"shard"`
	Slots int    `json:"slots"`
	// Docs is the documents its replica reported, -1 when none answered.
	Docs int64 `json:"docs"`
	// Listed is false for an owner the --shard list does not name (a
	// shard being drained, or a list that is not the cluster's).
	Listed bool `json:"listed"`
}

// adminSlots prints each collection's slot map (or the one named) as the
// catalog authority — the lowest-sorted shard's group — holds it, with
// every shard's slot and document counts.
func adminSlots(ctx context.Context, out io.Writer, shards []app.ShardSpec, dial client.DialConfig, only string, asJSON bool) error {
	auth := slices.MinFunc(shards, func(a, b app.ShardSpec) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	cat, err := firstAnswer(ctx, auth, dial, func(ctx context.Context, c *client.Conn) (*shardpb.CatalogResponse, error) {
		return c.Catalog(ctx, 0)
	})
	if err != nil {
		return fmt.Errorf("admin slots: the catalog's shard %s: %w", auth.Name, err)
	}
	docs := map[string]map[string]int64{} // shard → collection → docs
	for _, s := range shards {
		st, err := firstAnswer(ctx, s, dial, func(ctx context.Context, c *client.Conn) (*shardpb.StatsResponse, error) {
			return c.Stats(ctx)
		})
		if err != nil {
			continue
		}
		docs[s.Name] = map[string]int64{}
		for _, cs := range st.GetCollections() {
			docs[s.Name][cs.GetEntry().GetName()] = int64(cs.GetDocCount())
		}
	}
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = s.Name
	}
	var all []slotsStatus
	for _, e := range cat.GetCollections() {
		if only != "" && e.GetName() != only {
			continue
		}
		m := placement.SlotMap{Epoch: e.GetSlotMap().GetEpoch(), Owners: e.GetSlotMap().GetOwners(), Since: e.GetSlotMap().GetSince()}
		st := slotsStatus{Collection: e.GetName(), Slots: m.Slots(), Epoch: m.Epoch}
		counts := m.Counts(names)
		for _, n := range slices.Sorted(func(yield func(string) bool) {
			for n := range counts {
				if !yield(n) {
					return
				}
			}
		}) {
			sc := slotsShardCount{Shard: n, Slots: counts[n], Docs: -1, Listed: slices.Contains(names, n)}
			if d, ok := docs[n]; ok {
				sc.Docs = d[e.GetName()]
			}
			st.Shards = append(st.Shards, sc)
		}
		all = append(all, st)
	}
	if only != "" && len(all) == 0 {
		return fmt.Errorf("admin slots: the catalog holds no collection %q", only)
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	for _, st := range all {
		if st.Slots == 0 {
			fmt.Fprintf(out, "%s  created before slots: placed by jump hash over the shard list\n", st.Collection)
		} else {
			fmt.Fprintf(out, "%s  %d slots  map epoch %d\n", st.Collection, st.Slots, st.Epoch)
		}
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SHARD\tSLOTS\tDOCUMENTS\t")
		for _, sc := range st.Shards {
			d := "-"
			if sc.Docs >= 0 {
				d = fmt.Sprint(sc.Docs)
			}
			name := sc.Shard
			if !sc.Listed {
				name += " (not in --shard)"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t\n", name, sc.Slots, d)
		}
		_ = tw.Flush()
	}
	return nil
}

// firstAnswer asks spec's replicas in turn, each within 5 s, and returns
// the first answer.
func firstAnswer[T any](ctx context.Context, spec app.ShardSpec, dial client.DialConfig, call func(context.Context, *client.Conn) (T, error)) (T, error) {
	var (
		zero T
		errs []error
	)
	for _, a := range spec.Addrs {
		c, err := client.Dial(a, dial)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := call(cctx, c)
		cancel()
		_ = c.Close()
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
	}
	return zero, errors.Join(errs...)
}
