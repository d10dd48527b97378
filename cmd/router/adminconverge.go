package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// adminConverge brings the cluster to the shape the --shard list draws:
// every replica listed for a shard becomes a member of its group (added
// and waited for until promoted, as add-replica), then slots are moved
// until every listed shard holds its share (as rebalance). Both steps
// are no-ops on a cluster already so, which is what lets the Helm chart
// run it after every upgrade. It never removes a replica or drains a
// shard: the list says what must be there, not what must go.
func adminConverge(ctx context.Context, out io.Writer, shards []app.ShardSpec, dial client.DialConfig, f moveFlags) error {
	for _, spec := range shards {
		if err := convergeMembers(ctx, out, spec, dial); err != nil {
			return fmt.Errorf("admin converge: %w", err)
		}
	}
	return adminMoves(ctx, out, "rebalance", shards, dial, "", f)
}

// convergeMembers adds each of spec's replicas its group does not list.
func convergeMembers(ctx context.Context, out io.Writer, spec app.ShardSpec, dial client.DialConfig) error {
	g, err := dialGroup(spec, dial)
	if err != nil {
		return err
	}
	defer g.close()
	st, err := g.members(ctx, false)
	if err != nil {
		return err
	}
	voters := map[string]bool{}
	for _, m := range st.GetMembers() {
		voters[m.GetAddr()] = m.GetVoter()
	}
	added := 0
	for _, addr := range spec.Addrs {
		if voters[addr] {
			continue
		}
		// A non-voter listed is still catching up: the same request waits
		// for its promotion.
		t0 := time.Now()
		req := &shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Add{Add: addr}, Wait: true}
		if _, err := g.change(ctx, out, req); err != nil {
			return fmt.Errorf("%s: adding %s: %w", spec.Name, addr, err)
		}
		fmt.Fprintf(out, "%s: %s is a voter (%s)\n", spec.Name, addr, time.Since(t0).Round(time.Millisecond))
		added++
	}
	if added == 0 {
		fmt.Fprintf(out, "%s: every listed replica is a voter\n", spec.Name)
	}
	return nil
}
