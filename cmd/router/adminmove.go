package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/client"
)

// moveFlags are move-slot's, rebalance's and drain's.
type moveFlags struct {
	collection string
	slot       int
	to         string
	cfg        coordinator.MoveConfig
}

// adminMoves runs a slot move command through a coordinator over every
// --shard group: move-slot one slot, rebalance every slotted collection
// (or --collection) until each shard holds slots/shards of it give or take
// one, drain moves every slot off the shard named. Moves run one at a
// time, each printed as its slot flips; old owners drop their rows once
// their grace has passed, while later slots copy.
func adminMoves(ctx context.Context, out io.Writer, cmd string, shards []app.ShardSpec, dial client.DialConfig, target string, f moveFlags) error {
	var fs []fanout.Shard[*client.Conn]
	names := make([]string, len(shards))
	for i, spec := range shards {
		names[i] = spec.Name
		s := fanout.Shard[*client.Conn]{Name: spec.Name}
		for _, a := range spec.Addrs {
			c, err := client.Dial(a, dial)
			if err != nil {
				return err
			}
			defer c.Close()
			c.WaitSettled(ctx)
			s.Replicas = append(s.Replicas, c)
		}
		fs = append(fs, s)
	}
	co := coordinator.New(coordinator.Config{Cluster: fanout.New(fs, fanout.Options{Logger: slog.New(slog.DiscardHandler)})})
	colls, err := co.Collections(ctx)
	if err != nil {
		return fmt.Errorf("admin %s: reading the catalog: %w", cmd, err)
	}
	type job struct {
		coll  string
		steps []placement.Step
	}
	var jobs []job
	for _, c := range colls {
		if f.collection != "" && c.Name != f.collection || c.Slots.IsZero() {
			continue
		}
		switch cmd {
		case "move-slot":
			jobs = append(jobs, job{c.Name, []placement.Step{{Slot: f.slot, To: f.to}}})
		case "rebalance":
			jobs = append(jobs, job{c.Name, placement.Rebalance(c.Slots, names)})
		case "drain":
			jobs = append(jobs, job{c.Name, placement.Drain(c.Slots, names, target)})
		}
	}
	if f.collection != "" && len(jobs) == 0 {
		return fmt.Errorf("admin %s: no collection %q with a slot map", cmd, f.collection)
	}
	for _, j := range jobs {
		if len(j.steps) == 0 {
			fmt.Fprintf(out, "%s: balanced, nothing to move\n", j.coll)
			continue
		}
		t0 := time.Now()
		rows, moved := 0, 0
		err := co.MoveSlots(ctx, j.coll, j.steps, f.cfg, func(res coordinator.MoveResult) {
			rows += res.Rows
			moved++
			fmt.Fprintf(out, "%s slot %d: %s -> %s, %d rows, fenced %s (%d/%d, %d rows in %s)\n", j.coll, res.Slot, res.From, res.To,
				res.Rows, res.Copy.Round(time.Millisecond), moved, len(j.steps), rows, time.Since(t0).Round(time.Millisecond))
		})
		if err != nil {
			return fmt.Errorf("admin %s: %s, after %d of %d moves: %w", cmd, j.coll, moved, len(j.steps), err)
		}
		fmt.Fprintf(out, "%s: %d slots moved and settled, %d rows in %s\n", j.coll, moved, rows, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}
