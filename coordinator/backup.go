package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// BackupConfig is one backup's or restore's storage and progress report.
type BackupConfig struct {
	Store backup.Store
	// Progress, when set, is called with the rows done so far and the
	// rows in all (0 until known).
	Progress func(done, total int64)
}

// restoreBatch is how many rows a restore writes per upsert: the API's
// own per-request limit, so each batch is an ordinary write.
const restoreBatch = 256

// NewBackupID returns a fresh backup id: the time it was taken (so ids
// sort by age) and a random suffix.
func NewBackupID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Backup writes collection name to cfg.Store under name/id. Each shard
// group commits a backup cut entry and one of its replicas streams the
// collection as it stood at that entry (its copy-on-write view), so the
// backup holds, per group, exactly the writes before its cut, which are
// every write acknowledged before Backup was called and, at most, some
// acknowledged while it ran. The groups' cuts are committed in parallel
// (docs/operations.md states what that guarantees across shards). The
// manifest is written last: until then the backup is not listed, and a
// failed backup removes what it wrote.
func (c *Coordinator) Backup(ctx context.Context, name, id string, cfg BackupConfig) (backup.Manifest, error) {
	coll, err := c.Collection(ctx, name)
	if err != nil {
		return backup.Manifest{}, err
	}
	if err := checkBackupNamed(coll); err != nil {
		return backup.Manifest{}, err
	}
	for attempt := 1; ; attempt++ {
		m, err := c.backupOnce(ctx, coll, id, fmt.Sprintf("%s/%d", id, attempt), cfg)
		if !errors.Is(err, errLateCut) || attempt == backupRounds {
			return m, err
		}
		c.log.Warn("backup cuts not all under one fence; taking them again", "collection", coll.Name, "backup", id, "err", err)
	}
}

// backupCutTimeout bounds the wait for a replica's cut: committed through
// its group's log and applied by that replica (a write's timeout, twice).
const backupCutTimeout = 2 * shard.WriteTimeout

// backupRounds bounds how often a backup takes its cuts again because
// one was taken outside the fence (errLateCut).
const backupRounds = 3

// errLateCut marks a backup one of whose cuts was not taken while every
// group was fenced (a stream broke after the fences were lifted, or a
// fence's lease ended first): it is taken again.
var errLateCut = errors.New("a shard's cut was taken outside the backup's fence")

// backupOnce is one try of Backup: every group's cut raises the fence
// named fence, and once every group's cut is in, the fences are lifted;
// the streams go on meanwhile.
func (c *Coordinator) backupOnce(ctx context.Context, coll Collection, id, fence string, cfg BackupConfig) (backup.Manifest, error) {
	prefix := path.Join(coll.Name, id)
	w := backup.NewWriter(cfg.Store, prefix)
	shards := make([]backup.Shard, len(c.shards))
	var entry atomic.Pointer[shardpb.CollectionEntry]
	var done, total atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	// The barrier: each group's first cut counts; when all are in, the
	// fences are lifted. A cut whose header arrives after that was not
	// under the fence everywhere (errLateCut).
	var (
		cutMu   sync.Mutex
		cutSeen = make([]bool, len(c.shards))
		cuts    int
		lifting bool
		allCut  = make(chan struct{})
	)
	cutTaken := func(i int) error {
		cutMu.Lock()
		defer cutMu.Unlock()
		if lifting {
			return errorf(CodeUnavailable, errLateCut, "backup of collection `%s`: shard %s: %v", coll.Name, c.shards[i].Name, errLateCut)
		}
		if !cutSeen[i] {
			cutSeen[i] = true
			if cuts++; cuts == len(c.shards) {
				lifting = true
				close(allCut)
			}
		}
		return nil
	}
	defer func() {
		// Whatever happened, no fence outlives the backup: writes wait
		// only while the cuts are taken (or the fence's lease).
		cutMu.Lock()
		lifted := lifting
		lifting = true
		cutMu.Unlock()
		if !lifted {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
			_ = c.liftFences(lctx, coll, fence)
			cancel()
		}
	}()
	g.Go(func() error {
		select {
		case <-allCut:
		case <-gctx.Done():
			return nil
		}
		return c.liftFences(gctx, coll, fence)
	})
	for i, s := range c.shards {
		g.Go(func() error {
			var (
				sw      *backup.ShardWriter
				index   uint64
				counted int64
			)
			err := c.backupShard(gctx, i, func(ctx context.Context, r *client.Conn, cut string) error {
				if sw != nil { // an earlier attempt's rows
					sw.Abort()
					sw = nil
					total.Add(-counted)
					counted = 0
				}
				// A replica that cannot apply the cut (cut off from its
				// group) would hold the backup, and the other groups'
				// fences, until the caller gives up: past backupCutTimeout
				// without a header the next replica is asked.
				actx, cancel := context.WithCancel(ctx)
				defer cancel()
				timer := time.AfterFunc(backupCutTimeout, cancel)
				defer timer.Stop()
				return r.In(coll.ref()).Slots(c.readSlots(coll, r)).Backup(actx, cut, fence,
					func(h *shardpb.BackupHeader) error {
						timer.Stop()
						if e := h.GetEntry(); e.GetUid() != coll.UID {
							return errorf(CodeConflict, nil, "collection `%s` was dropped and created again during the backup", coll.Name)
						}
						if err := cutTaken(i); err != nil {
							return err
						}
						entry.CompareAndSwap(nil, h.GetEntry())
						index, counted = h.GetIndex(), int64(h.GetCount())
						total.Add(counted)
						var serr error
						sw, serr = w.Shard(ctx, s.Name, coll.Settings.Dim, counted)
						return serr
					},
					func(vs []*shardpb.Vector) error {
						for _, v := range vs {
							vec, err := vector.DecodeLE(v.GetVector())
							if err != nil {
								return fmt.Errorf("shard %s row %q: %w", s.Name, v.GetId(), err)
							}
							if err := sw.Add(v.GetId(), vec, v.GetPayload()); err != nil {
								return err
							}
						}
						if cfg.Progress != nil {
							cfg.Progress(done.Add(int64(len(vs))), total.Load())
						}
						return nil
					})
			}, id)
			if err != nil {
				if sw != nil {
					sw.Abort()
				}
				var e *Error
				if errors.As(err, &e) {
					return e
				}
				return errorf(CodeUnavailable, err, "backup of collection `%s`: shard %s: %v", coll.Name, s.Name, err)
			}
			if err := sw.Close(index); err != nil {
				return errorf(CodeInternal, err, "backup of collection `%s`: shard %s: %v", coll.Name, s.Name, err)
			}
			shards[i] = sw.Info()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		_ = cfg.Store.RemoveAll(context.WithoutCancel(ctx), prefix)
		return backup.Manifest{}, err
	}
	at := collectionOf(entry.Load())
	m := backup.Manifest{ID: id, Collection: coll.Name, Created: time.Now().UTC(), Settings: settingsOf(at.Settings),
		PayloadSchema: at.PayloadSchema, Shards: shards}
	if !at.Slots.IsZero() {
		m.SlotMap = &backup.SlotMap{Epoch: at.Slots.Epoch, Owners: at.Slots.Owners}
	}
	m, err := w.Finish(ctx, m)
	if err != nil {
		_ = cfg.Store.RemoveAll(context.WithoutCancel(ctx), prefix)
		return backup.Manifest{}, errorf(CodeInternal, err, "backup of collection `%s`: %v", coll.Name, err)
	}
	return m, nil
}

// liftFences lifts fence on every group, all at once. A group whose fence
// was no longer in place (its lease ended before every cut was in) makes
// the backup's cuts unreliable across shards: errLateCut.
func (c *Coordinator) liftFences(ctx context.Context, coll Collection, fence string) error {
	errs := make([]error, len(c.shards))
	var wg sync.WaitGroup
	for i, s := range c.shards {
		wg.Go(func() {
			var (
				lifted bool
				wr     fanout.WriteResult
			)
			// A lift is safe to send again: one that did apply before
			// its answer was lost makes the next say not lifted, which
			// retakes the cuts (errLateCut), never a torn backup. A
			// replica killed under the lift must not fail the backup.
			for attempt := range liftAttempts {
				if attempt > 0 && sleepCtx(ctx, time.Duration(attempt)*100*time.Millisecond) != nil {
					break
				}
				wr = fanout.Write(ctx, c.cluster, s.Name, func(ctx context.Context, r *client.Conn) (err error) {
					lifted, err = r.In(coll.ref()).LiftFence(ctx, fence)
					return err
				})
				if wr.Outcome == fanout.WriteOK {
					break
				}
			}
			switch {
			case wr.Outcome != fanout.WriteOK:
				errs[i] = errorf(CodeUnavailable, wr.Err, "backup of collection `%s`: lifting the write fence on shard %s: %v (it ends with its lease)", coll.Name, s.Name, wr.Err)
			case !lifted:
				errs[i] = errorf(CodeUnavailable, errLateCut, "backup of collection `%s`: shard %s: the write fence's lease ended before every cut was taken: %v", coll.Name, s.Name, errLateCut)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// liftAttempts bounds how often a group's fence lift is sent.
const liftAttempts = 5

// backupRetryFor bounds how long a backup keeps going round a shard's
// replicas: a replica killed mid-stream costs one attempt, and the next
// takes a fresh cut; a killed leader leaves its group refusing the cut
// ("not the leader", naming the dead one) until it elects another, a few
// heartbeat timeouts. Five rounds in two seconds were too few for that.
const backupRetryFor = 30 * time.Second

// backupShard runs export (one replica's Backup stream) on shard i's
// replicas in turn until one completes. Each attempt commits its own cut
// (id and the attempt's number), since a stream cut short cannot be
// resumed: its view died with the call. A use-case error (*Error: the
// collection is gone) ends it at once.
func (c *Coordinator) backupShard(ctx context.Context, i int, export func(context.Context, *client.Conn, string) error, id string) error {
	var last error
	n := 0
	start := time.Now()
	for round := 0; round == 0 || time.Since(start) < backupRetryFor; round++ {
		if round > 0 {
			t := time.NewTimer(min(time.Duration(round)*200*time.Millisecond, time.Second))
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), last)
			case <-t.C:
			}
		}
		for _, r := range c.cluster.Shards()[i].Replicas {
			if !r.Ready() {
				continue
			}
			n++
			err := export(ctx, r, fmt.Sprintf("%s.%d", id, n))
			if err == nil {
				return nil
			}
			var e *Error
			if errors.As(err, &e) || ctx.Err() != nil {
				return err
			}
			c.log.Warn("backup attempt failed; trying another replica", "shard", c.shards[i].Name, "replica", r.Addr(), "err", err)
			last = err
		}
	}
	if last == nil {
		last = errors.New("no replica is ready")
	}
	return last
}

// Backups lists collection name's complete backups in cfg.Store, oldest
// first. The collection need not exist any more.
func (c *Coordinator) Backups(ctx context.Context, name string, store backup.Store) ([]backup.Manifest, error) {
	if err := catalog.ValidName(name); err != nil {
		return nil, errorf(CodeInvalid, err, "%v", err)
	}
	ms, err := backup.List(ctx, store, name)
	if err != nil {
		return nil, errorf(CodeInternal, err, "listing the backups of `%s`: %v", name, err)
	}
	return ms, nil
}

// DeleteBackup removes backup id of collection name from store.
func (c *Coordinator) DeleteBackup(ctx context.Context, name, id string, store backup.Store) error {
	prefix, err := backupPrefix(name, id)
	if err != nil {
		return err
	}
	if _, err := backup.Open(ctx, store, prefix); errors.Is(err, fs.ErrNotExist) {
		return errorf(CodeNotFound, err, "collection `%s` has no backup `%s`", name, id)
	}
	if err := store.RemoveAll(ctx, prefix); err != nil {
		return errorf(CodeInternal, err, "deleting backup `%s`: %v", id, err)
	}
	return nil
}

// backupPrefix checks a backup's names and returns where it is kept.
func backupPrefix(name, id string) (string, error) {
	if err := catalog.ValidName(name); err != nil {
		return "", errorf(CodeInvalid, err, "%v", err)
	}
	if err := catalog.ValidName(id); err != nil {
		return "", errorf(CodeInvalid, err, "backup id: %v", err)
	}
	return path.Join(name, id), nil
}

// RestoreResult is what a restore did.
type RestoreResult struct {
	Collection string
	Rows       int64
	Manifest   backup.Manifest
}

// Restore creates collection target from backup id of collection source
// in cfg.Store, with the backup's settings, and writes its rows through
// the ordinary write path in batches, so they are dealt to the target's
// shards by its own placement (any shard count). Every file is checked
// against the manifest before anything is written: a corrupt backup is
// refused (CodeInvalid naming the file) and the cluster is unchanged. The
// target must not exist. It is created restoring (Collection.Restoring):
// until every row is in and one catalog change clears the flag, it answers
// clients CodeUnavailable, so none sees part of its rows. A restore that
// fails after creating it deletes it again; one whose router died leaves
// it restoring (never serving) until it is deleted, and a restore into it
// is refused CodeConflict until then.
func (c *Coordinator) Restore(ctx context.Context, source, id, target string, cfg BackupConfig) (RestoreResult, error) {
	prefix, err := backupPrefix(source, id)
	if err != nil {
		return RestoreResult{}, err
	}
	return c.RestoreFrom(ctx, prefix, target, cfg)
}

// RestoreFrom is Restore of the backup at prefix of cfg.Store (a backup
// unpacked from an archive, or found at a path an operator named).
func (c *Coordinator) RestoreFrom(ctx context.Context, prefix, target string, cfg BackupConfig) (RestoreResult, error) {
	if err := catalog.ValidName(target); err != nil {
		return RestoreResult{}, errorf(CodeInvalid, err, "%v", err)
	}
	id := prefix
	r, err := backup.Open(ctx, cfg.Store, prefix)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return RestoreResult{}, errorf(CodeNotFound, err, "there is no backup `%s`", id)
	case backup.IsCorrupt(err):
		return RestoreResult{}, errorf(CodeInvalid, err, "backup `%s` is refused: %v; nothing was restored", id, err)
	case err != nil:
		return RestoreResult{}, errorf(CodeInternal, err, "reading backup `%s`: %v", id, err)
	}
	if err := r.Verify(ctx); err != nil {
		if backup.IsCorrupt(err) {
			return RestoreResult{}, errorf(CodeInvalid, err, "backup `%s` is refused: %v; nothing was restored", id, err)
		}
		return RestoreResult{}, errorf(CodeInternal, err, "reading backup `%s`: %v", id, err)
	}
	set, err := settingsFrom(r.Manifest.Settings)
	if err != nil {
		return RestoreResult{}, errorf(CodeInvalid, err, "backup `%s`: %v", id, err)
	}
	if coll, err := c.Collection(ctx, target); err == nil || coll.Name != "" {
		if coll.Restoring {
			return RestoreResult{}, errorf(CodeConflict, nil,
				"collection `%s` is being restored, or was left half restored by a restore that did not finish: delete it first, then restore again", target)
		}
		return RestoreResult{}, errorf(CodeConflict, nil, "collection `%s` exists: delete it first, or restore under another name", target)
	}
	created, won, err := c.createCollection(ctx, target, set, 0, true)
	if err != nil {
		return RestoreResult{}, err
	}
	if !created {
		// Created by someone else between the check and the create.
		return RestoreResult{}, errorf(CodeConflict, nil, "collection `%s` exists: delete it first, or restore under another name", target)
	}
	coll := collectionOf(won)
	res, err := c.restoreRows(ctx, r, coll, cfg)
	if err == nil {
		err = c.markRestored(ctx, coll)
	}
	if err != nil {
		if _, derr := c.DropCollection(context.WithoutCancel(ctx), target); derr != nil {
			c.log.Error("a failed restore's collection could not be deleted", "collection", target, "err", derr)
		}
		return RestoreResult{}, err
	}
	return res, nil
}

// restoreRows writes the backup's rows into coll, which is restoring:
// its writes go through c.Upsert, past the catalog lookup that refuses
// clients.
func (c *Coordinator) restoreRows(ctx context.Context, r *backup.Reader, coll Collection, cfg BackupConfig) (RestoreResult, error) {
	target := coll.Name
	var total int64
	for _, s := range r.Manifest.Shards {
		total += s.Rows
	}
	var (
		mu   sync.Mutex
		done int64
	)
	for _, s := range r.Manifest.Shards {
		err := r.Rows(ctx, s, restoreBatch, func(rows []backup.Row) error {
			recs := make([]Record, len(rows))
			for i, row := range rows {
				recs[i] = Record{ID: row.ID, Vector: row.Vector, Payload: row.Payload}
			}
			for _, wr := range c.Upsert(ctx, coll, recs) {
				if wr.Outcome != fanout.WriteOK {
					return errorf(CodeUnavailable, wr.Err, "restoring `%s`: writing %q: %v", target, wr.ID, wr.Err)
				}
			}
			mu.Lock()
			done += int64(len(rows))
			d := done
			mu.Unlock()
			if cfg.Progress != nil {
				cfg.Progress(d, total)
			}
			return ctx.Err()
		})
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return RestoreResult{}, e
			}
			if backup.IsCorrupt(err) {
				return RestoreResult{}, errorf(CodeInvalid, err, "backup `%s` is refused: %v; the restore was undone", r.Manifest.ID, err)
			}
			return RestoreResult{}, errorf(CodeInternal, err, "restoring `%s`: %v", target, err)
		}
	}
	return RestoreResult{Collection: target, Rows: done, Manifest: r.Manifest}, nil
}

func settingsOf(s catalog.Settings) backup.Settings {
	return backup.Settings{Dimension: s.Dim, Metric: s.Metric.String(), Quantization: s.Quantization, Index: s.Index, Float32: s.Float32}
}

func settingsFrom(b backup.Settings) (catalog.Settings, error) {
	m, err := vector.ParseMetric(b.Metric)
	if err != nil {
		return catalog.Settings{}, fmt.Errorf("settings.metric: %w", err)
	}
	s := catalog.Settings{Dim: b.Dimension, Metric: m, Quantization: b.Quantization, Index: b.Index, Float32: b.Float32}.Normalize()
	return s, s.Validate()
}
