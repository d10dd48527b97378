package app

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// Discovery settings.
const (
	// DiscoveryInterval is how often the router asks each shard's group
	// for its members: a replica added takes reads within about this long
	// of its promotion (it is asked once it serves), and a removed one
	// stops being asked as soon.
	DiscoveryInterval = 2 * time.Second
	// discoveryTimeout bounds one Members question to one replica.
	discoveryTimeout = time.Second
	// settleTimeout bounds the wait for a new member's connection (the
	// connect timeout is 2 s; TLS handshakes included).
	settleTimeout = 3 * time.Second
	// closeGrace is how long a removed replica's connection stays open
	// (Config.RetireAfter overrides it)
	// after discovery drops it: reads and writes that picked it before the
	// change finish on it (the longest a query may take is the 10 s
	// --max-deadline-ms default; a write's timeout is 5 s).
	closeGrace = 15 * time.Second
)

// retired is a dropped replica's connection, closed at its time.
type retired struct {
	conn *client.Conn
	at   time.Time
}

// discover keeps each shard's replica set equal to its group's
// configuration (--shard flags only seed it): every DiscoveryInterval it
// asks the shard's replicas for the members their group lists, and takes
// the answer with the highest configuration index, since a replica cut
// off or removed from its group still lists an old configuration. New
// members are dialled and join the fan-out as untried replicas; dropped
// ones leave it at once and are closed after closeGrace. It returns when
// ctx ends, having closed the connections it retired.
func (r *Router) discover(ctx context.Context, cfg Config) {
	t := time.NewTicker(DiscoveryInterval)
	defer t.Stop()
	var retiring []retired
	defer func() {
		for _, x := range retiring {
			_ = x.conn.Close()
		}
	}()
	dial := cfg.Dial
	dial.Lazy = cfg.NoPrewarm
	grace := cmp.Or(cfg.RetireAfter, closeGrace)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		retiring = slices.DeleteFunc(retiring, func(x retired) bool {
			if now.Before(x.at) {
				return false
			}
			r.untrackConn(x.conn)
			_ = x.conn.Close()
			return true
		})
		for _, s := range r.Cluster.Shards() {
			want := groupMembers(ctx, s.Replicas)
			if len(want) == 0 || sameAddrs(want, s.Replicas) {
				continue
			}
			have := map[string]*client.Conn{}
			for _, c := range s.Replicas {
				have[c.Addr()] = c
			}
			next := make([]*client.Conn, 0, len(want))
			var dialled []*client.Conn
			for _, a := range want {
				if c, ok := have[a]; ok {
					next = append(next, c)
					continue
				}
				c, err := client.Dial(a, dial)
				if err != nil {
					cfg.Logger.Warn("discovered replica not dialled", "shard", s.Name, "replica", a, "err", err)
					continue
				}
				next = append(next, c)
				dialled = append(dialled, c)
			}
			// The new connections settle (READY, or failed) before the
			// swap: reads choose only READY replicas, so a set swapped
			// while its newcomers still connect would, for a moment,
			// leave a shard whose members all changed with none to ask.
			settleNew(ctx, dialled)
			removed, err := r.Cluster.SetReplicas(s.Name, next)
			if err != nil {
				for _, c := range dialled {
					_ = c.Close()
				}
				continue
			}
			r.trackConns(dialled)
			gone := make([]string, len(removed))
			for i, c := range removed {
				gone[i] = c.Addr()
				retiring = append(retiring, retired{conn: c, at: now.Add(grace)})
			}
			cfg.Logger.Info("shard replicas changed: learnt from its group", "shard", s.Name, "replicas", want, "removed", gone)
		}
	}
}

// settleNew waits, within settleTimeout, until each of cs is READY or
// has failed to connect.
func settleNew(ctx context.Context, cs []*client.Conn) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { c.WaitSettled(ctx) })
	}
	wg.Wait()
}

// groupMembers asks every replica of a shard for its group's members at
// once and returns the voters of the newest configuration any of them
// gave (newestVoters); none when none answered.
func groupMembers(ctx context.Context, reps []*client.Conn) []string {
	resps := make([]*shardpb.MembersResponse, len(reps))
	var wg sync.WaitGroup
	for i, c := range reps {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
			defer cancel()
			if resp, err := c.Members(cctx, false); err == nil {
				resps[i] = resp
			}
		})
	}
	wg.Wait()
	return newestVoters(resps)
}

// newestVoters is the addresses of the voters of the newest
// configuration among resps (nil entries did not answer): a replica cut
// off or removed from its group still lists an old configuration. Newest
// is the answer with the highest commit index (raft gives no
// configuration index): a removed or cut-off replica's commit index stops
// at or before the entry that changed the group, while its members' goes
// on. A non-voter
// is left out: it is still catching up, would refuse every read as not
// serving, and, never measured, would be every read's first choice until
// its promotion.
func newestVoters(resps []*shardpb.MembersResponse) []string {
	var best *shardpb.MembersResponse
	for _, r := range resps {
		if len(r.GetMembers()) > 0 && (best == nil || r.GetCommitIndex() > best.GetCommitIndex()) {
			best = r
		}
	}
	var out []string
	for _, m := range best.GetMembers() {
		if m.GetVoter() {
			out = append(out, m.GetAddr())
		}
	}
	return out
}

// sameAddrs reports whether reps are exactly the replicas at addrs.
func sameAddrs(addrs []string, reps []*client.Conn) bool {
	if len(addrs) != len(reps) {
		return false
	}
	for _, c := range reps {
		if !slices.Contains(addrs, c.Addr()) {
			return false
		}
	}
	return true
}
