package devcluster

import (
	"context"
	"fmt"
	"time"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard/client"
)

// collectionTimeout bounds the create of the dev collection: the groups
// elect their leaders first (a new group's first replica stands at once).
const collectionTimeout = time.Minute

// settings are the dev collection's: the cluster's dimension, metric,
// quantization and index.
func (cfg Config) settings() catalog.Settings {
	return catalog.Settings{Dim: cfg.Dim, Metric: cfg.Metric, Quantization: cfg.Quantization.String(), Index: cfg.Index.String()}.Normalize()
}

// ensureCollection creates the dev collection (cfg.Collection) through
// the router's own catalog code, a coordinator over the replicas, the way
// router serve's --ensure-collection does, and returns it as the catalog
// holds it. A collection that exists with equal settings is found; one
// with other settings is refused unless the data directory was loaded
// (it is then used as it is, with a warning: it holds the data).
func (c *Cluster) ensureCollection(cfg Config) (coordinator.Collection, error) {
	var shards []fanout.Shard[*client.Conn]
	for i, reps := range c.Replicas {
		s := fanout.Shard[*client.Conn]{Name: c.Names[i]}
		for _, r := range reps {
			conn, err := client.Dial(r.Addr, client.DialConfig{})
			if err != nil {
				return coordinator.Collection{}, err
			}
			defer conn.Close()
			s.Replicas = append(s.Replicas, conn)
		}
		shards = append(shards, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), collectionTimeout)
	defer cancel()
	// Connections are made on first use; a catalog read over replicas not
	// connected yet would miss the authority's answer.
	for _, s := range shards {
		for _, conn := range s.Replicas {
			conn.WaitSettled(ctx)
		}
	}
	coord := coordinator.New(coordinator.Config{Cluster: fanout.New(shards, fanout.Options{Logger: cfg.Logger}), Logger: cfg.Logger})
	want := cfg.settings()
	for {
		created, err := coord.CreateCollection(ctx, cfg.Collection, want)
		if err == nil {
			if created {
				cfg.Logger.Info("collection created", "collection", cfg.Collection, "settings", want.String())
			}
			break
		}
		code := coordinator.CodeOf(err)
		if code == coordinator.CodeConflict && c.Loaded {
			cfg.Logger.Warn("the data directory's collection has other settings than asked; it is used as it is",
				"collection", cfg.Collection, "asked", want.String(), "err", err)
			break
		}
		if code != coordinator.CodeUnavailable || ctx.Err() != nil {
			return coordinator.Collection{}, fmt.Errorf("create collection %s: %w", cfg.Collection, err)
		}
		time.Sleep(100 * time.Millisecond) // leaders being elected
	}
	// The create is committed; a catalog read that missed the authority
	// (a leader change) may not show it yet.
	for {
		coll, err := coord.Collection(ctx, cfg.Collection)
		if err == nil {
			return coll, nil
		}
		switch coordinator.CodeOf(err) {
		case coordinator.CodeUnavailable, coordinator.CodeCollectionNotFound:
		default:
			return coordinator.Collection{}, fmt.Errorf("collection %s: %w", cfg.Collection, err)
		}
		if ctx.Err() != nil {
			return coordinator.Collection{}, fmt.Errorf("collection %s: %w", cfg.Collection, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// bindStores points every replica's Store at its store of the cluster's
// collection, waiting (up to timeout) for each to have applied its create.
func (c *Cluster) bindStores(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, reps := range c.Replicas {
		for _, r := range reps {
			for {
				if st, ok := r.Collections.Store(c.Collection.Name); ok {
					r.Store = st
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s replica %d holds no collection %s after %s", r.Shard, r.Index, c.Collection.Name, timeout)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	return nil
}
