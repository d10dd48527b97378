package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// BackupConfig is one backup's or restore's storage and progress report.
type BackupConfig struct {
	Store backup.Store
	// Progress, when set, is called with the rows done so far and the
	// rows in all (0 until known).
	Progress func(done, total int64)
	// Resume has a restore into a collection left restoring (by a
	// restore whose router died) continue it instead of refusing it:
	// see Restore.
	Resume bool
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
	ms, err := c.backupRounds(ctx, []Collection{coll}, []string{path.Join(coll.Name, id)}, false, id, cfg)
	if err != nil {
		return backup.Manifest{}, err
	}
	return ms[0], nil
}

// BackupAll writes every collection of the catalog (but those a restore
// is still filling) to cfg.Store as one cluster backup, backup.ClusterPrefix(id),
// at one cut per shard group: each group commits a single cut entry that
// covers every collection it holds and fences all their writes, and the
// fences are lifted together once every group's cut is in. So across
// collections as across shards, the backup holds every write
// acknowledged before BackupAll was called and, of the writes
// acknowledged while it ran, a set closed under "acknowledged before"
// (docs/operations.md). Each collection's part is a complete collection
// backup (backup.PartPrefix) that restores alone; the cluster manifest is
// written last.
func (c *Coordinator) BackupAll(ctx context.Context, id string, cfg BackupConfig) (backup.ClusterManifest, error) {
	if err := catalog.ValidName(id); err != nil {
		return backup.ClusterManifest{}, errorf(CodeInvalid, err, "backup id: %v", err)
	}
	all, err := c.Collections(ctx)
	if err != nil {
		return backup.ClusterManifest{}, err
	}
	var (
		colls    []Collection
		prefixes []string
	)
	for _, coll := range all {
		if coll.Restoring {
			continue // not a collection yet: its restore has not finished
		}
		if err := checkBackupNamed(coll); err != nil {
			return backup.ClusterManifest{}, err
		}
		colls = append(colls, coll)
	}
	sort.Slice(colls, func(i, j int) bool { return colls[i].Name < colls[j].Name })
	for _, coll := range colls {
		prefixes = append(prefixes, backup.PartPrefix(id, coll.Name))
	}
	cm := backup.ClusterManifest{ID: id, Created: time.Now().UTC()}
	if len(colls) > 0 {
		ms, err := c.backupRounds(ctx, colls, prefixes, true, id, cfg)
		if err != nil {
			return backup.ClusterManifest{}, err
		}
		for _, s := range ms[0].Shards {
			cm.Cuts = append(cm.Cuts, backup.Cut{Shard: s.Name, Index: s.Index})
		}
		for _, m := range ms {
			p := backup.Part{Collection: m.Collection}
			for _, s := range m.Shards {
				p.Rows += s.Rows
			}
			for _, f := range m.Files {
				p.Bytes += f.Bytes
			}
			cm.Collections = append(cm.Collections, p)
		}
	}
	cm, err = backup.FinishCluster(ctx, cfg.Store, cm)
	if err != nil {
		_ = cfg.Store.RemoveAll(context.WithoutCancel(ctx), backup.ClusterPrefix(id))
		return backup.ClusterManifest{}, errorf(CodeInternal, err, "cluster backup: %v", err)
	}
	return cm, nil
}

// backupRounds takes the backup of colls (at prefixes) until its cuts are
// all under one fence, at most backupRounds times. cluster has every
// group cut them all at one entry (BackupAll).
func (c *Coordinator) backupRounds(ctx context.Context, colls []Collection, prefixes []string, cluster bool, id string, cfg BackupConfig) ([]backup.Manifest, error) {
	for attempt := 1; ; attempt++ {
		ms, err := c.backupOnce(ctx, colls, prefixes, cluster, id, fmt.Sprintf("%s/%d", id, attempt), cfg)
		if !errors.Is(err, errLateCut) || attempt == backupRounds {
			return ms, err
		}
		c.log.Warn("backup cuts not all under one fence; taking them again", "collections", len(colls), "backup", id, "err", err)
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

// backupOnce is one try of a backup of colls, each written under its
// prefix: every group's cut raises the fence named fence (on every one of
// colls, at one entry when cluster), and once every group's cut is in,
// the fences are lifted; the streams go on meanwhile.
func (c *Coordinator) backupOnce(ctx context.Context, colls []Collection, prefixes []string, cluster bool, id, fence string, cfg BackupConfig) ([]backup.Manifest, error) {
	what := "collection `" + colls[0].Name + "`"
	if cluster {
		what = "the cluster"
	}
	ws := make([]*backup.Writer, len(colls))
	for j := range colls {
		ws[j] = backup.NewWriter(cfg.Store, prefixes[j])
	}
	removeAll := func() {
		for _, p := range prefixes {
			_ = cfg.Store.RemoveAll(context.WithoutCancel(ctx), p)
		}
	}
	// shards[j][i] is collection j's part from shard i.
	shards := make([][]backup.Shard, len(colls))
	entries := make([]atomic.Pointer[shardpb.CollectionEntry], len(colls))
	for j := range colls {
		shards[j] = make([]backup.Shard, len(c.shards))
	}
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
			return errorf(CodeUnavailable, errLateCut, "backup of %s: shard %s: %v", what, c.shards[i].Name, errLateCut)
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
			_ = c.liftFences(lctx, colls, cluster, fence)
			cancel()
		}
	}()
	g.Go(func() error {
		select {
		case <-allCut:
		case <-gctx.Done():
			return nil
		}
		return c.liftFences(gctx, colls, cluster, fence)
	})
	for i, s := range c.shards {
		g.Go(func() error {
			var (
				sws     []*backup.ShardWriter
				index   uint64
				counted int64
			)
			abort := func() {
				for _, sw := range sws {
					sw.Abort()
				}
				sws = nil
			}
			err := c.backupShard(gctx, i, func(ctx context.Context, r *client.Conn, cut string) error {
				abort() // an earlier attempt's rows
				total.Add(-counted)
				counted = 0
				// A replica that cannot apply the cut (cut off from its
				// group) would hold the backup, and the other groups'
				// fences, until the caller gives up: past backupCutTimeout
				// without a header the next replica is asked.
				actx, cancel := context.WithCancel(ctx)
				defer cancel()
				timer := time.AfterFunc(backupCutTimeout, cancel)
				defer timer.Stop()
				header := func(h *shardpb.BackupHeader) error {
					timer.Stop()
					j := len(sws)
					if j >= len(colls) {
						return fmt.Errorf("shard %s sent %d collections, %d were asked", s.Name, j+1, len(colls))
					}
					coll := colls[j]
					if e := h.GetEntry(); e.GetUid() != coll.UID {
						return errorf(CodeConflict, nil, "collection `%s` was dropped and created again during the backup", coll.Name)
					}
					if j == 0 {
						if err := cutTaken(i); err != nil {
							return err
						}
						index = h.GetIndex()
					} else if h.GetIndex() != index {
						return fmt.Errorf("shard %s: collection %s cut at index %d, not the stream's %d", s.Name, coll.Name, h.GetIndex(), index)
					}
					entries[j].CompareAndSwap(nil, h.GetEntry())
					n := int64(h.GetCount())
					counted += n
					total.Add(n)
					sw, err := ws[j].Shard(ctx, s.Name, coll.Settings.Dim, n)
					if err != nil {
						return err
					}
					sws = append(sws, sw)
					if err := withCodes(ctx, sw, h); err != nil {
						return fmt.Errorf("shard %s collection %s: %w", s.Name, coll.Name, err)
					}
					return nil
				}
				rows := func(vs []*shardpb.Vector) error {
					if len(sws) == 0 {
						return fmt.Errorf("shard %s sent rows before a header", s.Name)
					}
					sw := sws[len(sws)-1]
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
				}
				var err error
				if cluster {
					parts := make([]client.BackupPart, len(colls))
					for j, coll := range colls {
						parts[j] = client.BackupPart{Collection: coll.ref(), Slots: c.readSlots(coll, r)}
					}
					err = r.BackupParts(actx, cut, fence, parts, header, rows)
				} else {
					err = r.In(colls[0].ref()).Slots(c.readSlots(colls[0], r)).Backup(actx, cut, fence, header, rows)
				}
				if err == nil && len(sws) != len(colls) {
					err = fmt.Errorf("shard %s sent %d of the %d collections asked", s.Name, len(sws), len(colls))
				}
				return err
			}, id)
			if err != nil {
				abort()
				var e *Error
				if errors.As(err, &e) {
					return e
				}
				return errorf(CodeUnavailable, err, "backup of %s: shard %s: %v", what, s.Name, err)
			}
			for j, sw := range sws {
				if err := sw.Close(index); err != nil {
					abort()
					return errorf(CodeInternal, err, "backup of collection `%s`: shard %s: %v", colls[j].Name, s.Name, err)
				}
				shards[j][i] = sw.Info()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		removeAll()
		return nil, err
	}
	ms := make([]backup.Manifest, len(colls))
	for j, coll := range colls {
		at := collectionOf(entries[j].Load())
		m := backup.Manifest{ID: id, Collection: coll.Name, Created: time.Now().UTC(), Settings: settingsOf(at.Settings),
			PayloadSchema: at.PayloadSchema, Shards: shards[j]}
		if !at.Slots.IsZero() {
			m.SlotMap = &backup.SlotMap{Epoch: at.Slots.Epoch, Owners: at.Slots.Owners}
		}
		m, err := ws[j].Finish(ctx, m)
		if err != nil {
			removeAll()
			return nil, errorf(CodeInternal, err, "backup of collection `%s`: %v", coll.Name, err)
		}
		ms[j] = m
	}
	return ms, nil
}

// withCodes has sw write the int8 codes of an int8 collection whose group
// had committed a scale by the cut (the header carries it): the codes are
// encoded from the cut's rows with that scale, as every replica encodes
// them, so they are the codes the replicas hold.
func withCodes(ctx context.Context, sw *backup.ShardWriter, h *shardpb.BackupHeader) error {
	set := h.GetEntry().GetSettings()
	if len(h.GetInt8Scale()) == 0 || (set.GetQuantization() != catalog.QuantInt8 && set.GetIndex() != catalog.IndexIVF) {
		return nil
	}
	var scale quant.Scale
	if err := scale.UnmarshalBinary(h.GetInt8Scale()); err != nil {
		return fmt.Errorf("the group's int8 scale: %w", err)
	}
	return sw.WithCodes(ctx, scale)
}

// liftFences lifts fence on every group, all at once: on each of colls,
// at one entry per group when cluster. A group whose fence was no longer
// in place (its lease ended before every cut was in) makes the backup's
// cuts unreliable across shards: errLateCut.
func (c *Coordinator) liftFences(ctx context.Context, colls []Collection, cluster bool, fence string) error {
	what := "collection `" + colls[0].Name + "`"
	refs := make([]client.Collection, len(colls))
	for j, coll := range colls {
		refs[j] = coll.ref()
	}
	if cluster {
		what = "the cluster"
	}
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
					if cluster {
						lifted, err = r.LiftFences(ctx, fence, refs)
					} else {
						lifted, err = r.In(refs[0]).LiftFence(ctx, fence)
					}
					return err
				})
				if wr.Outcome == fanout.WriteOK {
					break
				}
			}
			switch {
			case wr.Outcome != fanout.WriteOK:
				errs[i] = errorf(CodeUnavailable, wr.Err, "backup of %s: lifting the write fence on shard %s: %v (it ends with its lease)", what, s.Name, wr.Err)
			case !lifted:
				errs[i] = errorf(CodeUnavailable, errLateCut, "backup of %s: shard %s: the write fence's lease ended before every cut was taken: %v", what, s.Name, errLateCut)
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
//
// id may name a cluster backup (BackupAll) too: its part of source is
// restored.
func (c *Coordinator) Restore(ctx context.Context, source, id, target string, cfg BackupConfig) (RestoreResult, error) {
	prefix, err := backupPrefix(source, id)
	if err != nil {
		return RestoreResult{}, err
	}
	if _, err := backup.Open(ctx, cfg.Store, prefix); errors.Is(err, fs.ErrNotExist) {
		if cm, cerr := backup.OpenCluster(ctx, cfg.Store, id); cerr == nil {
			// The part's manifest checked against the cluster manifest;
			// RestoreFrom checks every file against the part's.
			_, err := backup.OpenPart(ctx, cfg.Store, cm, source)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return RestoreResult{}, errorf(CodeNotFound, err, "cluster backup `%s` holds no collection `%s`", id, source)
			case backup.IsCorrupt(err):
				return RestoreResult{}, errorf(CodeInvalid, err, "backup `%s` is refused: %v; nothing was restored", id, err)
			case err != nil:
				return RestoreResult{}, errorf(CodeInternal, err, "reading backup `%s`: %v", id, err)
			}
			prefix = backup.PartPrefix(id, source)
		}
	}
	return c.RestoreFrom(ctx, prefix, target, cfg)
}

// ClusterBackups lists the complete cluster backups in store, oldest
// first.
func (c *Coordinator) ClusterBackups(ctx context.Context, store backup.Store) ([]backup.ClusterManifest, error) {
	ms, err := backup.ListCluster(ctx, store)
	if err != nil {
		return nil, errorf(CodeInternal, err, "listing the cluster backups: %v", err)
	}
	return ms, nil
}

// DeleteClusterBackup removes cluster backup id from store.
func (c *Coordinator) DeleteClusterBackup(ctx context.Context, id string, store backup.Store) error {
	if err := catalog.ValidName(id); err != nil {
		return errorf(CodeInvalid, err, "backup id: %v", err)
	}
	if _, err := backup.OpenCluster(ctx, store, id); errors.Is(err, fs.ErrNotExist) {
		return errorf(CodeNotFound, err, "there is no cluster backup `%s`", id)
	}
	if err := store.RemoveAll(ctx, backup.ClusterPrefix(id)); err != nil {
		return errorf(CodeInternal, err, "deleting backup `%s`: %v", id, err)
	}
	return nil
}

// RestoreAll restores every collection of cluster backup id under its own
// name. Every part is checked (manifest digest, every file's size and
// SHA-256) and no target may exist before anything is written; the
// collections are then restored one after another, each as Restore does.
// If one fails, those this call restored are deleted again, so a failed
// RestoreAll leaves the cluster as it found it.
func (c *Coordinator) RestoreAll(ctx context.Context, id string, cfg BackupConfig) ([]RestoreResult, error) {
	if err := catalog.ValidName(id); err != nil {
		return nil, errorf(CodeInvalid, err, "backup id: %v", err)
	}
	cm, err := backup.OpenCluster(ctx, cfg.Store, id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errorf(CodeNotFound, err, "there is no cluster backup `%s`", id)
	case backup.IsCorrupt(err):
		return nil, errorf(CodeInvalid, err, "cluster backup `%s` is refused: %v; nothing was restored", id, err)
	case err != nil:
		return nil, errorf(CodeInternal, err, "reading cluster backup `%s`: %v", id, err)
	}
	readers := make([]*backup.Reader, len(cm.Collections))
	for i, p := range cm.Collections {
		r, err := backup.OpenPart(ctx, cfg.Store, cm, p.Collection)
		if err == nil {
			err = r.Verify(ctx)
		}
		if backup.IsCorrupt(err) {
			return nil, errorf(CodeInvalid, err, "cluster backup `%s`, collection `%s`, is refused: %v; nothing was restored", id, p.Collection, err)
		}
		if err != nil {
			return nil, errorf(CodeInternal, err, "reading cluster backup `%s`: %v", id, err)
		}
		if coll, err := c.Collection(ctx, p.Collection); err == nil || coll.Name != "" {
			return nil, errorf(CodeConflict, nil, "collection `%s` exists: delete it first; nothing was restored", p.Collection)
		}
		readers[i] = r
	}
	var out []RestoreResult
	for i, p := range cm.Collections {
		res, err := c.restoreVerified(ctx, readers[i], p.Collection, cfg)
		if err != nil {
			for _, done := range out {
				if _, derr := c.DropCollection(context.WithoutCancel(ctx), done.Collection); derr != nil {
					c.log.Error("a failed restore's collection could not be deleted", "collection", done.Collection, "err", derr)
				}
			}
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
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
	return c.restoreVerified(ctx, r, target, cfg)
}

// restoreVerified is RestoreFrom of a backup r whose files were verified.
func (c *Coordinator) restoreVerified(ctx context.Context, r *backup.Reader, target string, cfg BackupConfig) (RestoreResult, error) {
	id := r.Manifest.ID
	set, err := settingsFrom(r.Manifest.Settings)
	if err != nil {
		return RestoreResult{}, errorf(CodeInvalid, err, "backup `%s`: %v", id, err)
	}
	if coll, err := c.Collection(ctx, target); err == nil || coll.Name != "" {
		if coll.Restoring && cfg.Resume {
			return c.resumeRestore(ctx, r, coll, set, cfg)
		}
		if coll.Restoring {
			return RestoreResult{}, errorf(CodeConflict, nil,
				"collection `%s` is being restored, or was left half restored by a restore that did not finish: resume it (the same backup again, with resume), or delete it first, then restore again", target)
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

// resumeRestore continues a restore into coll, which a restore whose
// router died left restoring: every row of the backup is written again (an
// upsert of an id is idempotent, so rows the dead restore wrote change
// nothing), then the target must hold exactly the backup's row count — a
// row it holds that the backup lacks was written by a restore of another
// backup, and the target is left restoring for the operator to delete.
// Only then is the flag cleared. A resume that fails leaves the target
// restoring, to be resumed again (not deleted: it holds the work done).
// Two restores resuming one target at once write the same rows; the
// caller should not run them (the first to finish serves the target).
func (c *Coordinator) resumeRestore(ctx context.Context, r *backup.Reader, coll Collection, set catalog.Settings, cfg BackupConfig) (RestoreResult, error) {
	if settingsOf(coll.Settings) != settingsOf(set) {
		return RestoreResult{}, errorf(CodeConflict, nil,
			"collection `%s` was being restored with other settings than backup `%s` has: it was restoring another backup; delete it first, then restore again", coll.Name, r.Manifest.ID)
	}
	c.log.Info("resuming a restore", "collection", coll.Name, "backup", r.Manifest.ID)
	res, err := c.restoreRows(ctx, r, coll, cfg)
	if err != nil {
		return RestoreResult{}, err
	}
	cnt, err := c.Count(ctx, coll, nil, budget.ForDeadline(shard.WriteTimeout), false)
	if err != nil {
		return RestoreResult{}, errorf(CodeUnavailable, err, "resuming the restore of `%s`: counting its rows: %v; resume again", coll.Name, err)
	}
	if int64(cnt.Count) != res.Rows {
		return RestoreResult{}, errorf(CodeConflict, nil,
			"collection `%s` holds %d rows after resuming, backup `%s` has %d: it was restoring another backup; delete it first, then restore again",
			coll.Name, cnt.Count, r.Manifest.ID, res.Rows)
	}
	if err := c.markRestored(ctx, coll); err != nil {
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
