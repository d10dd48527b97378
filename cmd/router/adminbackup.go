package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/shard/client"
)

// backupFlags are the backup commands' own flags.
type backupFlags struct {
	dir        string // --backup-dir
	collection string // --collection: the collection backed up
	id         string // restore: --backup
	to         string // restore: --to, the collection restored into
}

// adminBackups lists a collection's backups in --backup-dir; it needs no
// shard.
func adminBackups(ctx context.Context, out io.Writer, f backupFlags) error {
	co := coordinator.New(coordinator.Config{Cluster: fanout.New[*client.Conn](nil, fanout.Options{})})
	ms, err := co.Backups(ctx, f.collection, backup.Dir(f.dir))
	if err != nil {
		return fmt.Errorf("admin backups: %w", err)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
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
	cfg := coordinator.BackupConfig{Store: backup.Dir(f.dir), Progress: p.update}
	t0 := time.Now()
	switch cmd {
	case "backup":
		m, err := co.Backup(ctx, f.collection, coordinator.NewBackupID(t0), cfg)
		p.finish()
		if err != nil {
			return fmt.Errorf("admin backup: %w", err)
		}
		var rows int64
		for _, s := range m.Shards {
			rows += s.Rows
		}
		fmt.Fprintf(out, "backup %s of %s: %d rows from %d shards in %s (%s/%s)\n",
			m.ID, m.Collection, rows, len(m.Shards), time.Since(t0).Round(time.Millisecond), f.dir, m.Collection+"/"+m.ID)
	case "restore":
		to := f.to
		if to == "" {
			to = f.collection
		}
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
	}
}
