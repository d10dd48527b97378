package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/loader"
	"github.com/trawl-search/trawl/shard/client"
)

// backupFlags are the backup commands' own flags.
type backupFlags struct {
	store      storeFlags // --backup-dir or --backup-s3-*
	collection string     // --collection: the collection backed up
	id         string     // restore: --backup
	to         string     // restore: --to, the collection restored into
	router     string     // backup: --router, back up through a router's API
	keyFile    string     // with --router: --api-key-file
	keep       int        // backup: --keep, the newest backups kept (0: all)
	all        bool       // --all: a cluster backup (every collection at one cut)
	resume     bool       // restore: --resume, continue a restore left unfinished
}

// adminBackups lists a collection's backups in --backup-dir; it needs no
// shard.
func adminBackups(ctx context.Context, out io.Writer, f backupFlags) error {
	co := coordinator.New(coordinator.Config{Cluster: fanout.New[*client.Conn](nil, fanout.Options{})})
	st, err := f.store.store()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if f.all {
		cms, err := co.ClusterBackups(ctx, st)
		if err != nil {
			return fmt.Errorf("admin backups: %w", err)
		}
		fmt.Fprintln(tw, "ID\tCREATED\tCOLLECTIONS\tROWS\tBYTES\tRAFT INDEXES")
		for _, m := range cms {
			var rows, bytes int64
			for _, p := range m.Collections {
				rows += p.Rows
				bytes += p.Bytes
			}
			idx := make([]string, len(m.Cuts))
			for i, c := range m.Cuts {
				idx[i] = fmt.Sprintf("%s@%d", c.Shard, c.Index)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", m.ID, m.Created.Format(time.RFC3339), len(m.Collections), rows, bytes, strings.Join(idx, ","))
		}
		return tw.Flush()
	}
	ms, err := co.Backups(ctx, f.collection, st)
	if err != nil {
		return fmt.Errorf("admin backups: %w", err)
	}
	fmt.Fprintln(tw, "ID\tCREATED\tROWS\tBYTES\tRAFT INDEXES")
	for _, m := range ms {
		var rows, bytes int64
		idx := ""
		for i, s := range m.Shards {
			rows += s.Rows
			if i > 0 {
				idx += ","
			}
			idx += fmt.Sprintf("%s@%d", s.Name, s.Index)
		}
		for _, fl := range m.Files {
			bytes += fl.Bytes
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", m.ID, m.Created.Format(time.RFC3339), rows, bytes, idx)
	}
	return tw.Flush()
}

// adminBackup runs backup or restore from this process, over the shards'
// gRPC ports, with --backup-dir a local path (or a mounted volume).
func adminBackup(ctx context.Context, out io.Writer, cmd string, shards []app.ShardSpec, dial client.DialConfig, f backupFlags) error {
	var fs []fanout.Shard[*client.Conn]
	for _, spec := range shards {
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
	p := newBackupProgress(out, cmd)
	st, err := f.store.store()
	if err != nil {
		return err
	}
	cfg := coordinator.BackupConfig{Store: st, Progress: p.update}
	t0 := time.Now()
	switch cmd {
	case "backup":
		if f.all {
			m, err := co.BackupAll(ctx, coordinator.NewBackupID(t0), cfg)
			p.finish()
			if err != nil {
				return fmt.Errorf("admin backup --all: %w", err)
			}
			var rows int64
			for _, c := range m.Collections {
				rows += c.Rows
			}
			fmt.Fprintf(out, "cluster backup %s: %d collections, %d rows, at one cut in each of %d shards, in %s\n",
				m.ID, len(m.Collections), rows, len(m.Cuts), time.Since(t0).Round(time.Millisecond))
			return nil
		}
		// One collection after another, each at its own cuts.
		for _, name := range strings.Split(f.collection, ",") {
			t0 := time.Now()
			m, err := co.Backup(ctx, name, coordinator.NewBackupID(t0), cfg)
			p.finish()
			if err != nil {
				return fmt.Errorf("admin backup of %s: %w", name, err)
			}
			var rows int64
			for _, s := range m.Shards {
				rows += s.Rows
			}
			fmt.Fprintf(out, "backup %s of %s: %d rows from %d shards in %s\n",
				m.ID, m.Collection, rows, len(m.Shards), time.Since(t0).Round(time.Millisecond))
		}
	case "restore":
		if f.all {
			res, err := co.RestoreAll(ctx, f.id, cfg)
			p.finish()
			if err != nil {
				return fmt.Errorf("admin restore --all: %w", err)
			}
			for _, r := range res {
				fmt.Fprintf(out, "restored %s: %d rows\n", r.Collection, r.Rows)
			}
			fmt.Fprintf(out, "restored cluster backup %s: %d collections in %s\n", f.id, len(res), time.Since(t0).Round(time.Millisecond))
			return nil
		}
		to := f.to
		if to == "" {
			to = f.collection
		}
		cfg.Resume = f.resume
		res, err := co.Restore(ctx, f.collection, f.id, to, cfg)
		p.finish()
		if err != nil {
			return fmt.Errorf("admin restore: %w", err)
		}
		fmt.Fprintf(out, "restored backup %s of %s into %s: %d rows in %s\n", f.id, f.collection, res.Collection, res.Rows,
			time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// backupProgress draws a progress bar on a terminal and prints nothing
// otherwise (a CronJob's log gets the summary line).
type backupProgress struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
	w   io.Writer
	cmd string
}

func newBackupProgress(out io.Writer, cmd string) *backupProgress {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &backupProgress{}
	}
	return &backupProgress{w: out, cmd: cmd}
}

func (p *backupProgress) update(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(p.cmd),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionFullWidth(), progressbar.OptionThrottle(100*time.Millisecond))
	}
	p.bar.ChangeMax64(max(total, done))
	_ = p.bar.Set64(done)
}

func (p *backupProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil // the next collection draws its own
	}
}

// adminBackupViaRouter asks a router (started with --backup-dir) to back
// each collection up through its API, so the router's own metrics record
// it (what the chart's CronJob does: the router image has no shell), then
// keeps only the newest keep backups of each (0: all). No collections
// (--all) takes one cluster backup instead, and keeps the newest keep
// cluster backups.
func adminBackupViaRouter(ctx context.Context, out io.Writer, router, keyFile string, collections []string, keep int) error {
	key := ""
	if keyFile != "" {
		var err error
		if key, err = loader.ReadAPIKey(keyFile); err != nil {
			return err
		}
	}
	call := func(method, path string, into any) error {
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(router, "/")+path, nil)
		if err != nil {
			return err
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
		}
		return json.Unmarshal(body, into)
	}
	if len(collections) == 0 { // --all: one cluster backup
		var made struct {
			Backup struct {
				ID          string `json:"id"`
				Bytes       int64  `json:"bytes"`
				Collections []any  `json:"collections"`
			} `json:"backup"`
		}
		t0 := time.Now()
		if err := call(http.MethodPost, "/v1/backups", &made); err != nil {
			return fmt.Errorf("admin backup --all: %w", err)
		}
		fmt.Fprintf(out, "cluster backup %s: %d collections, %d bytes in %s\n", made.Backup.ID, len(made.Backup.Collections),
			made.Backup.Bytes, time.Since(t0).Round(time.Millisecond))
		if keep <= 0 {
			return nil
		}
		var list struct {
			Backups []struct {
				ID string `json:"id"`
			} `json:"backups"`
		}
		if err := call(http.MethodGet, "/v1/backups", &list); err != nil {
			return fmt.Errorf("admin backup --all: retention skipped: %w", err)
		}
		var failed error
		for i := 0; i < len(list.Backups)-keep; i++ {
			var del map[string]any
			if err := call(http.MethodDelete, "/v1/backups/"+list.Backups[i].ID, &del); err != nil {
				fmt.Fprintf(out, "deleting cluster backup %s: %v\n", list.Backups[i].ID, err)
				failed = err
				continue
			}
			fmt.Fprintf(out, "deleted cluster backup %s (keeping %d)\n", list.Backups[i].ID, keep)
		}
		return failed
	}
	var failed []string
	for _, c := range collections {
		var made struct {
			Backup struct {
				ID    string `json:"id"`
				Bytes int64  `json:"bytes"`
			} `json:"backup"`
		}
		t0 := time.Now()
		if err := call(http.MethodPost, "/v1/collections/"+c+"/backups", &made); err != nil {
			fmt.Fprintf(out, "%s: backup failed: %v\n", c, err)
			failed = append(failed, c)
			continue
		}
		fmt.Fprintf(out, "%s: backup %s, %d bytes in %s\n", c, made.Backup.ID, made.Backup.Bytes, time.Since(t0).Round(time.Millisecond))
		if keep <= 0 {
			continue
		}
		var list struct {
			Backups []struct {
				ID string `json:"id"`
			} `json:"backups"`
		}
		if err := call(http.MethodGet, "/v1/collections/"+c+"/backups", &list); err != nil {
			fmt.Fprintf(out, "%s: retention skipped: %v\n", c, err)
			failed = append(failed, c)
			continue
		}
		// Oldest first: all but the newest keep go.
		for i := 0; i < len(list.Backups)-keep; i++ {
			var del map[string]any
			if err := call(http.MethodDelete, "/v1/collections/"+c+"/backups/"+list.Backups[i].ID, &del); err != nil {
				fmt.Fprintf(out, "%s: deleting %s: %v\n", c, list.Backups[i].ID, err)
				continue
			}
			fmt.Fprintf(out, "%s: deleted backup %s (keeping %d)\n", c, list.Backups[i].ID, keep)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("admin backup: failed for %s", strings.Join(failed, ", "))
	}
	return nil
}

// adminUpload copies a backup from --backup-dir to the bucket, resuming
// an interrupted copy (backup.Upload), with a progress line per part on a
// terminal.
func adminUpload(ctx context.Context, out io.Writer, f backupFlags) error {
	only := f.store
	only.dir = ""
	c, err := only.s3Config()
	if err != nil {
		return err
	}
	dst, err := backup.NewS3(*c)
	if err != nil {
		return err
	}
	prefix := f.collection + "/" + f.id
	src := backup.Dir(f.store.dir)
	r, err := backup.Open(ctx, src, prefix)
	if err != nil {
		return fmt.Errorf("admin upload: %w", err)
	}
	var total int64
	for _, fl := range r.Manifest.Files {
		total += fl.Bytes
	}
	p := newBackupProgress(out, "upload")
	t0 := time.Now()
	st, err := backup.Upload(ctx, src, prefix, dst, func(s backup.UploadStats) { p.update(s.Bytes, total) })
	p.finish()
	if err != nil {
		return fmt.Errorf("admin upload (run it again to resume): %w", err)
	}
	fmt.Fprintf(out, "uploaded %s of %s: %d files (%d already there), %d parts sent, %d reused from an interrupted upload, %d bytes in %s\n",
		f.id, f.collection, st.Files, st.Skipped, st.Parts, st.Reused, st.Bytes, time.Since(t0).Round(time.Millisecond))
	return nil
}
