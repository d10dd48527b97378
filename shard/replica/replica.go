// Package replica assembles one shard replica from its parts: its
// collections (the catalog and a store per collection), the raft node that
// replicates them, the state machine that applies the log to them, the
// trainers that commit the values every replica shares, and the gRPC
// server that answers the router.
// `router shard` and `router dev` build their replicas here, so a replica
// is put together one way only.
//
// The package wires; it must not hold logic of its own (scanning,
// replication, serving rules and fault handling live in the packages it
// wires), and it never listens: the caller owns its gRPC servers and
// registers the replica on them.
package replica

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/cpuprio"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftgrpc"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/recovery"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// Config is one replica: the legacy collection's settings, its
// membership of its shard's group, and its dependencies.
type Config struct {
	// Legacy are the settings of the legacy collection
	// (shard.LegacyCollection): the collection a data directory written
	// before collections holds, and the one requests and log entries that
	// name no collection act on. catalog.Defaults() if zero.
	Legacy catalog.Settings
	Kernel vector.Kernel

	// DataDir holds the raft log and snapshots; InMemory keeps them in
	// memory instead (tests: a real group without a disk).
	DataDir  string
	InMemory bool
	// Advertise is this replica's address as its peers reach it; Peers
	// every replica of the shard, this one included (empty: a group of
	// one).
	Advertise string
	Peers     []string
	// Join: the replica joins an existing group instead of seeding one
	// (raftnode.Config.Join); the caller then asks the group to add it
	// (Server.Join) once its gRPC port serves.
	Join bool
	// MaxLeaderSilence, HeartbeatTimeout and ElectionTimeout are the
	// node's (raftnode.Config; its defaults if zero).
	MaxLeaderSilence time.Duration
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// SnapshotThreshold, TrailingLogs, SnapshotLogBytes and
	// TrailingLogBytes are the node's too (its defaults if zero).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotLogBytes  uint64
	TrailingLogBytes  uint64
	// PeerCreds are the client credentials raft traffic to peers uses;
	// nil means plaintext. PeerDialer, when set, replaces the TCP dialer
	// to peers (tests).
	PeerCreds  credentials.TransportCredentials
	PeerDialer func(ctx context.Context, addr string) (net.Conn, error)

	// Recovery throttles this replica's recovery work: restoring a
	// snapshot, applying the log while it catches up, and, as a leader,
	// streaming a snapshot or catch-up entries to a follower. Nil: full
	// speed. Replicas in one process may share one.
	Recovery *recovery.Throttle
	// RecoveryAlone says the replica is alone in its process (`router
	// shard`): its state machine's recovery work, done while it does not
	// serve, is then charged all the process's CPU (receiving and storing
	// the log, garbage collection), not only the applying thread's
	// (recovery.ProcessPacer). Replicas sharing a process (`router dev`,
	// tests) must leave it false.
	RecoveryAlone bool
	// SegmentRows is how many rows a float32 segment file holds
	// (server.CollectionsConfig; segment.SegmentRows if zero).
	SegmentRows int

	// Int8MinRows and IVFMinRows are the trainer's (store.TrainerConfig).
	Int8MinRows int
	IVFMinRows  int

	// Observer, when set, is told of scans and each collection's document
	// count.
	Observer server.ScanObserver
	// Scans admits scans (server.Config).
	Scans          *admission.ScanQueue
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	// RaftLogLevel is the least level of the raft library's own lines
	// that reach Logger (slog.LevelWarn if zero).
	RaftLogLevel slog.Level
	// BackgroundNice lowers the CPU priority of the threads that store
	// and apply the log by this much (raftnode.Config.BackgroundNice); 0
	// leaves them at the process's.
	BackgroundNice int
}

// Replica is one running replica. Register it on the gRPC servers that
// serve it, and Close it when done.
type Replica struct {
	// Store is the legacy collection's store (Collections.Legacy): the
	// documents of routers that name no collection.
	Store       *store.Memory
	Collections *server.Collections
	Node        *raftnode.Node
	Server      *server.Server
	encoder     *cpuprio.Worker // the stores' background work; nil without BackgroundNice
}

// DefaultBackgroundNice is `router shard --background-nice`'s default:
// at nice 10 a thread gets about a tenth of the share of one at 0 when
// both want a core, so searches run first, and a bulk load still gets a
// core's tenth while searches keep every core busy.
const DefaultBackgroundNice = 10

// SegmentDir is the directory under DataDir where collections placed on
// disk keep their float32 segment files.
const SegmentDir = "segments"

// Open assembles the replica: it loads its collections from the data
// directory (the latest snapshot; the log after it is applied once a
// leader confirms the commit index) and starts raft and the trainers.
func Open(cfg Config) (*Replica, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Kernel.Name == "" {
		return nil, errors.New("replica: a vector kernel is required")
	}
	var docs server.DocumentObserver
	if cfg.Observer != nil {
		docs = cfg.Observer
	}
	var segDir string
	if !cfg.InMemory && cfg.DataDir != "" {
		segDir = filepath.Join(cfg.DataDir, SegmentDir)
	}
	// Encoding a write's int8 codes runs on a thread of lower priority
	// (the raft log's bolt writes do too, in raftnode), so a bulk load
	// takes the cores searches leave.
	enc, err := cpuprio.Start(cfg.BackgroundNice)
	if err != nil {
		return nil, err
	}
	var background func(func())
	if enc != nil {
		background = enc.Do
	}
	cols := server.NewCollections(server.CollectionsConfig{Legacy: cfg.Legacy, Kernel: cfg.Kernel, Observer: docs, Logger: cfg.Logger,
		SegmentDir: segDir, SegmentRows: cfg.SegmentRows, Background: background})
	peerOpts := shard.DialOptions(cfg.PeerCreds, cfg.PeerDialer)
	// A nil *Throttle in an interface would not be nil: pass none at all.
	var (
		smPace            store.Pacer
		sendPace, receive raftgrpc.Pacer
	)
	switch {
	case cfg.Recovery != nil && cfg.RecoveryAlone:
		// One pacer for both: each piece is charged the process's CPU
		// since the previous piece of either.
		whole := cfg.Recovery.WholeProcess()
		smPace, sendPace, receive = whole, cfg.Recovery, whole
	case cfg.Recovery != nil:
		smPace, sendPace, receive = cfg.Recovery, cfg.Recovery, cfg.Recovery
	}
	node, err := raftnode.Open(raftnode.Config{
		DataDir:           cfg.DataDir,
		InMemory:          cfg.InMemory,
		Advertise:         cfg.Advertise,
		Peers:             cfg.Peers,
		Join:              cfg.Join,
		MaxLeaderSilence:  cfg.MaxLeaderSilence,
		HeartbeatTimeout:  cfg.HeartbeatTimeout,
		ElectionTimeout:   cfg.ElectionTimeout,
		SnapshotThreshold: cfg.SnapshotThreshold,
		TrailingLogs:      cfg.TrailingLogs,
		SnapshotLogBytes:  cfg.SnapshotLogBytes,
		TrailingLogBytes:  cfg.TrailingLogBytes,
		DialOptions:       peerOpts,
		Pace:              sendPace,
		ReceivePace:       receive,
		StateMachine:      server.NewStateMachine(cols, cfg.Logger, smPace),
		RaftLogLevel:      cfg.RaftLogLevel,
		Logger:            cfg.Logger,
		BackgroundNice:    cfg.BackgroundNice,
	})
	if err != nil {
		enc.Close()
		return nil, err
	}
	srv := server.New(server.Config{
		Kernel: cfg.Kernel, Collections: cols, Node: node,
		Trainer: store.TrainerConfig{
			Int8MinRows: cfg.Int8MinRows, IVFMinRows: cfg.IVFMinRows, CommitTimeout: shard.WriteTimeout, Logger: cfg.Logger,
		},
		Observer: cfg.Observer, Logger: cfg.Logger, Scans: cfg.Scans, TracerProvider: cfg.TracerProvider,
		PeerDialOptions: peerOpts,
	})
	return &Replica{Store: cols.Legacy(), Collections: cols, Node: node, Server: srv, encoder: enc}, nil
}

// Register adds the replica's services (shard, health, raft) to g.
func (r *Replica) Register(g *grpc.Server) { r.Server.Register(g) }

// Close stops the trainers and the node. The replica leaves its group's
// quorum until it is opened again on the same data directory.
func (r *Replica) Close() error {
	r.Server.Shutdown()
	r.Collections.Close()
	err := r.Node.Close()
	r.Server.Close()
	r.encoder.Close()
	return err
}
