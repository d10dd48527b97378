package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// Config wires a Coordinator.
type Config struct {
	// Cluster is the fan-out engine over the cluster's shards: their
	// names and replicas are read from it.
	Cluster *fanout.Cluster[*client.Conn]
	Logger  *slog.Logger
	// MaxCollections bounds the catalog (DefaultMaxCollections if zero),
	// and with it the collection label of the router's metrics.
	MaxCollections int
	// CatalogRefresh is RunCatalog's period (DefaultCatalogRefresh if
	// zero).
	CatalogRefresh time.Duration
	// Collections, when set, is told the catalog's collections and their
	// documents after every periodic catalog read (SurveyCollections).
	Collections CollectionObserver
}

// Coordinator runs the router's use cases.
type Coordinator struct {
	shards    []fanout.Shard[*client.Conn]
	cluster   *fanout.Cluster[*client.Conn]
	placement placement.Table
	log       *slog.Logger
	cat       *catalogState
	// catalogRefresh is RunCatalog's period.
	catalogRefresh time.Duration
	observer       CollectionObserver
	docs           collectionDocs
	// where is each replica's shard (its position in the topology),
	// learnt on first sight: replicas come and go with discovery. progress
	// is what this router knows of each shard's log (read-after-write).
	where    sync.Map // *client.Conn → int
	progress *progress
}

// New builds a coordinator over cfg's shards.
func New(cfg Config) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	shards := cfg.Cluster.Shards()
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = s.Name
	}
	c := &Coordinator{shards: shards, cluster: cfg.Cluster, placement: placement.New(names), log: cfg.Logger,
		progress: newProgress(len(shards), time.Now),
		cat:      newCatalogState(shards, cfg.MaxCollections), observer: cfg.Collections}
	c.catalogRefresh = cmp.Or(cfg.CatalogRefresh, DefaultCatalogRefresh)
	return c
}

// stats surveys every replica's Stats.
func (c *Coordinator) stats(ctx context.Context) [][]fanout.Answered[*shardpb.StatsResponse] {
	return fanout.Survey(ctx, c.cluster, StatusTimeout, func(ctx context.Context, r *client.Conn) (*shardpb.StatsResponse, error) {
		return r.Stats(ctx)
	})
}

// Code classifies the errors this package returns, for the API to map to
// its statuses.
type Code int

// The error codes.
const (
	// CodeInternal: the shard or the router failed in a way the caller
	// cannot fix.
	CodeInternal Code = iota
	// CodeNotFound: no document with that id.
	CodeNotFound
	// CodeUnavailable: the shards needed could not answer (in time).
	CodeUnavailable
	// CodeConflict: the write was routed under another shard list than the
	// shard's data (a reshard), or a collection exists with other
	// settings.
	CodeConflict
	// CodeOutcomeUnknown: a write may or may not have been applied.
	CodeOutcomeUnknown
	// CodeCollectionNotFound: no collection (or alias) of that name.
	CodeCollectionNotFound
	// CodeInvalid: a collection's name or settings are not allowed.
	CodeInvalid
	// CodeOverloaded: a shard's every replica refused the read as
	// overloaded (RESOURCE_EXHAUSTED) while there was still time to come
	// back: the caller should retry shortly, not take a partial answer.
	CodeOverloaded
)

// Error is a use case's failure: a code for the API's status and a message
// meant for the client.
type Error struct {
	Code Code
	Msg  string
	// Err is the cause, when there is one.
	Err error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// CodeOf is err's Code: its *Error's, or CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

func errorf(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// Shape is the cluster's number of shards and the replicas of its
// smallest replica set (Qdrant's shard_number and replication_factor).
func (c *Coordinator) Shape() (shards, replicas int) {
	for i, s := range c.cluster.Shards() {
		if i == 0 || len(s.Replicas) < replicas {
			replicas = len(s.Replicas)
		}
	}
	return len(c.shards), replicas
}

// shardOf is r's shard, by its position in the topology.
func (c *Coordinator) shardOf(r *client.Conn) (int, bool) {
	if i, ok := c.where.Load(r); ok {
		return i.(int), true
	}
	for i, s := range c.cluster.Shards() {
		if slices.Contains(s.Replicas, r) {
			c.where.Store(r, i)
			return i, true
		}
	}
	return 0, false
}
