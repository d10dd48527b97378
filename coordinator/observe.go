package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// CollectionObserver is told, after every periodic catalog read, every
// collection of the catalog with its documents summed over the shards;
// metrics.Router is one. A collection missing from docs was dropped.
type CollectionObserver interface {
	ObserveCollections(docs map[string]uint64)
}

// collectionDocs is each shard's last known document count of each
// collection, from the Stats surveys of SurveyCollections.
type collectionDocs struct {
	mu sync.Mutex
	// byShard[i] maps a collection's name to shard i's count of the
	// incarnation uid.
	byShard []map[string]shardDocs
}

type shardDocs struct {
	uid  uint64
	docs uint64
}

// SurveyCollections reads the catalog, asks one replica of every shard
// for its counts of every collection (one Stats each, at once, within
// StatusTimeout), and tells the observer the catalog's collections with
// their documents. A shard that does not answer counts with its last
// answer. It also bounds the engine's per-collection bookkeeping to the
// catalog. RunCatalog calls it on every refresh; the router's warm-up
// calls it once, so /metrics has every collection's series by the time
// the router is ready.
func (c *Coordinator) SurveyCollections(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := c.refreshCatalog(ctx)
	if err != nil {
		return err
	}
	c.observe(ctx, v)
	return nil
}

// observe surveys the shards' counts and reports the collections of v.
func (c *Coordinator) observe(ctx context.Context, v *catalogView) {
	names := make([]string, 0, len(v.colls))
	for name := range v.colls {
		names = append(names, name)
	}
	c.cluster.KeepCollections(names)
	if c.observer == nil {
		return
	}
	answers := c.surveyStats(ctx)

	c.docs.mu.Lock()
	defer c.docs.mu.Unlock()
	if c.docs.byShard == nil {
		c.docs.byShard = make([]map[string]shardDocs, len(c.shards))
	}
	for i, a := range answers {
		if a == nil {
			continue // not heard: its last counts stand
		}
		held := map[string]shardDocs{}
		for _, cs := range a.GetCollections() {
			held[cs.GetEntry().GetName()] = shardDocs{uid: cs.GetEntry().GetUid(), docs: cs.GetDocCount()}
		}
		c.docs.byShard[i] = held
	}
	docs := make(map[string]uint64, len(v.colls))
	for name, coll := range v.colls {
		var n uint64
		for _, held := range c.docs.byShard {
			// Another incarnation's count (one being replaced or
			// dropped) is not this collection's.
			if d, ok := held[name]; ok && (coll.UID == 0 || d.uid == coll.UID) {
				n += d.docs
			}
		}
		docs[name] = n
	}
	c.observer.ObserveCollections(docs)
}

// surveyStats asks one replica of each shard (the engine's choice, failing
// over within the budget) for its Stats of every collection; nil for a
// shard that did not answer.
func (c *Coordinator) surveyStats(ctx context.Context) []*shardpb.StatsResponse {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StatusTimeout)
	defer cancel()
	req := fanout.Request{Start: time.Now(), Budget: budget.Budget{Deadline: StatusTimeout, Shard: StatusTimeout}, Control: true}
	answers := make([]*shardpb.StatsResponse, len(c.shards))
	var wg sync.WaitGroup
	for i, s := range c.shards {
		wg.Go(func() {
			st, err := fanout.Lookup(ctx, c.cluster, req, s.Name, func(ctx context.Context, r *client.Conn) (*shardpb.StatsResponse, error) {
				return r.Stats(ctx)
			})
			if err == nil {
				answers[i] = st
			}
		})
	}
	wg.Wait()
	return answers
}
