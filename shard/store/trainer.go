package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawl-search/trawl/vector/ivf"
)

// Proposer is the replica's way to commit a trained value through its
// group's log, so every replica, restart and snapshot install encodes and
// assigns rows with the same value. The replica's server is one.
type Proposer interface {
	// ServingLeader reports whether this replica leads its group and
	// serves reads: it has applied everything committed before its term,
	// so it sees any value already committed.
	ServingLeader() bool
	// SetTrained commits a trained value and returns its log index.
	SetTrained(ctx context.Context, name string, value []byte) (uint64, error)
}

// TrainerConfig tunes a Trainer.
type TrainerConfig struct {
	// Int8MinRows is how many rows a leader of a QuantInt8 store waits for
	// before it trains and commits the int8 scale (DefaultInt8MinRows if
	// zero).
	Int8MinRows int
	// IVFMinRows is how many rows a leader of an IVF store waits for, once
	// its int8 scale is committed, before it trains and commits centroids
	// (ivf.MinRows if zero); tests lower it to exercise the index on small
	// shards.
	IVFMinRows int
	// CommitTimeout bounds one commit of a trained value (5 s if zero).
	CommitTimeout time.Duration
	// Every is how often the trainer looks for work (100 ms if zero).
	Every  time.Duration
	Logger *slog.Logger
}

// Trainer keeps a store's trained values and index up to date: on a
// serving leader it trains the int8 scale, IVF centroids and the default
// nprobe once the store holds enough rows, and commits each through the
// Proposer; on every replica it builds the IVF index of the committed
// centroids in the background. Searches and writes go on meanwhile:
// samples are copied under the read lock and training holds no lock.
type Trainer struct {
	m   *Memory
	p   Proposer
	cfg TrainerConfig
	log *slog.Logger

	training atomic.Bool // a leader's int8 or IVF training is under way
	building atomic.Bool // an IVF index build is under way

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartTrainer starts m's trainer. Close stops it and waits for its
// background work.
func StartTrainer(m *Memory, p Proposer, cfg TrainerConfig) *Trainer {
	if cfg.Int8MinRows <= 0 {
		cfg.Int8MinRows = DefaultInt8MinRows
	}
	if cfg.IVFMinRows <= 0 {
		cfg.IVFMinRows = ivf.MinRows
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 5 * time.Second
	}
	if cfg.Every <= 0 {
		cfg.Every = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Trainer{m: m, p: p, cfg: cfg, log: cfg.Logger}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.wg.Add(1)
	go t.loop()
	return t
}

// Close stops the trainer: background training and builds are cancelled
// and waited for.
func (t *Trainer) Close() {
	t.cancel()
	t.wg.Wait()
}

func (t *Trainer) loop() {
	defer t.wg.Done()
	tick := time.NewTicker(t.cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		if t.p.ServingLeader() {
			t.maybeTrain()
		}
		t.maybeBuild()
	}
}

// maybeTrain, on a serving leader, trains what the store lacks, one
// training at a time. A failed commit (leadership lost) is retried at a
// later tick by whoever leads then.
func (t *Trainer) maybeTrain() {
	m := t.m
	switch {
	case m.needsIVFTrain(t.cfg.IVFMinRows):
		t.inBackground("ivf centroids", TrainedIVFCentroids, func(ctx context.Context) ([]byte, []any, error) {
			rows := m.Len()
			// Any seed would do (only the leader trains, and it commits
			// the result); the row count makes a run repeatable.
			b, lists, err := m.trainIVF(ctx, uint64(rows))
			return b, []any{"rows", rows, "lists", lists, "bytes", len(b)}, err
		})
	case m.needsIVFNProbe():
		// The index of the committed centroids is built: measure the
		// default nprobe its rows need (ivf.CalibrateNProbe), so every
		// replica probes as many lists for a query that names none.
		t.inBackground("ivf default nprobe", TrainedIVFNProbe, func(ctx context.Context) ([]byte, []any, error) {
			b, levels, err := m.calibrateIVF(ctx)
			var figures []any
			for _, l := range levels {
				figures = append(figures, fmt.Sprintf("nprobe_k%d", l.K), l.NProbe, fmt.Sprintf("sample_recall_k%d", l.K), l.Recall)
			}
			return b, figures, err
		})
	case m.needsInt8Scale(t.cfg.Int8MinRows):
		t.inBackground("int8 scale", TrainedInt8Scale, func(context.Context) ([]byte, []any, error) {
			b, err := m.trainInt8()
			return b, []any{"rows", m.Len()}, err
		})
	}
}

// inBackground runs train (one training at a time) and commits the value
// it returns as the trained value name, logging what with the figures
// train reports. A failure is left for a later tick to retry: an index
// replaced under a calibration (errBuildStale) or a trainer closing is not
// worth a log line, a lost leadership only a warning.
func (t *Trainer) inBackground(what, name string, train func(context.Context) ([]byte, []any, error)) {
	if !t.training.CompareAndSwap(false, true) {
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.training.Store(false)
		t0 := time.Now()
		b, figures, err := train(t.ctx)
		if err != nil {
			if t.ctx.Err() == nil && !errors.Is(err, errBuildStale) {
				t.log.Error(what+" training failed", "err", err)
			}
			return
		}
		took := time.Since(t0)
		ctx, cancel := context.WithTimeout(t.ctx, t.cfg.CommitTimeout)
		defer cancel()
		idx, err := t.p.SetTrained(ctx, name, b)
		if err != nil {
			t.log.Warn(what+" not committed; retrying later", "err", err)
			return
		}
		t.log.Info(what+" trained and committed", append(figures, "index", idx, "took", took.Round(time.Millisecond))...)
	}()
}

// maybeBuild starts building the IVF index of the committed centroids in
// the background when the store needs one (first centroids, a retrain, a
// restart or a snapshot install), on every replica: the index is a pure
// function of the centroids and the rows, so each replica builds its own
// rather than receiving it.
func (t *Trainer) maybeBuild() {
	if !t.m.needsIVFBuild() || !t.building.CompareAndSwap(false, true) {
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.building.Store(false)
		t0 := time.Now()
		built, err := t.m.BuildIndex(t.ctx)
		switch {
		case err != nil && t.ctx.Err() == nil:
			t.log.Error("ivf index build failed; serving without it", "err", err)
		case built:
			t.log.Info("ivf index built", "rows", t.m.Len(), "took", time.Since(t0).Round(time.Millisecond))
		}
	}()
}
