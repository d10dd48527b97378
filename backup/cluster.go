package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"
)

// ClusterDir is where cluster backups live in a Store: ClusterDir/ID/.
// '@' is not allowed in a collection name, so no collection's backups
// can share it.
const ClusterDir = "@cluster"

// ClusterFormat names a cluster backup's manifest.
const ClusterFormat = "trawl-cluster-backup"

// ClusterManifest describes a backup of every collection at one cut per
// shard group. Each collection's part is a complete collection backup
// (its own Manifest, files and checksums) under PartPrefix, so any one
// restores alone. It is written last.
type ClusterManifest struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// Cuts are the shard groups' cuts, one raft index each, shared by
	// every part.
	Cuts []Cut `json:"cuts"`
	// Collections are the parts, by collection name ascending.
	Collections []Part `json:"collections"`
}

// Cut is one shard group's cut in a cluster backup.
type Cut struct {
	Shard string `json:"shard"`
	Index uint64 `json:"raft_index"`
}

// Part is one collection's part of a cluster backup: its rows and the
// bytes of its files, and its manifest's name (relative to the cluster
// backup), size and SHA-256.
type Part struct {
	Collection     string `json:"collection"`
	Rows           int64  `json:"rows"`
	Bytes          int64  `json:"bytes"`
	Manifest       string `json:"manifest"`
	ManifestBytes  int64  `json:"manifest_bytes"`
	ManifestSHA256 string `json:"manifest_sha256"`
}

// ClusterPrefix is where cluster backup id is kept.
func ClusterPrefix(id string) string { return path.Join(ClusterDir, id) }

// PartPrefix is where collection's part of cluster backup id is kept: a
// collection backup, which Open reads like any other.
func PartPrefix(id, collection string) string {
	return path.Join(ClusterDir, id, "collections", collection)
}

// FinishCluster writes cluster backup m.ID's manifest, once every part's
// manifest is written: each part's manifest is read back for its digest.
// It fills in the parts' Manifest, ManifestBytes and ManifestSHA256.
func FinishCluster(ctx context.Context, store Store, m ClusterManifest) (ClusterManifest, error) {
	m.Format, m.Version = ClusterFormat, 1
	for i, p := range m.Collections {
		rel := path.Join("collections", p.Collection, ManifestFile)
		n, sum, err := digest(ctx, store, path.Join(ClusterPrefix(m.ID), rel))
		if err != nil {
			return m, fmt.Errorf("cluster backup %s: part %s: %w", m.ID, p.Collection, err)
		}
		m.Collections[i].Manifest, m.Collections[i].ManifestBytes, m.Collections[i].ManifestSHA256 = rel, n, sum
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	f, err := store.Create(ctx, path.Join(ClusterPrefix(m.ID), ManifestFile))
	if err != nil {
		return m, err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return m, err
	}
	return m, f.Close()
}

func digest(ctx context.Context, store Store, name string) (int64, string, error) {
	f, err := store.Open(ctx, name)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// OpenCluster reads cluster backup id's manifest; one without it is
// incomplete and wraps fs.ErrNotExist.
func OpenCluster(ctx context.Context, store Store, id string) (ClusterManifest, error) {
	f, err := store.Open(ctx, path.Join(ClusterPrefix(id), ManifestFile))
	if err != nil {
		return ClusterManifest{}, fmt.Errorf("cluster backup %s: %w", id, err)
	}
	defer f.Close()
	var m ClusterManifest
	if err := json.NewDecoder(f).Decode(&m); err != nil {
		return m, &CorruptError{File: ManifestFile, Reason: fmt.Sprintf("not a readable cluster manifest: %v", err)}
	}
	if m.Format != ClusterFormat || m.Version != 1 {
		return m, &CorruptError{File: ManifestFile, Reason: fmt.Sprintf("format %q version %d is not a cluster backup this trawl reads", m.Format, m.Version)}
	}
	return m, nil
}

// OpenPart opens collection's part of cluster backup m after checking its
// manifest against m's digest; a collection m does not hold wraps
// fs.ErrNotExist.
func OpenPart(ctx context.Context, store Store, m ClusterManifest, collection string) (*Reader, error) {
	for _, p := range m.Collections {
		if p.Collection != collection {
			continue
		}
		name := path.Join(ClusterPrefix(m.ID), p.Manifest)
		n, sum, err := digest(ctx, store, name)
		if err != nil {
			return nil, &CorruptError{File: p.Manifest, Reason: fmt.Sprintf("cannot be read: %v", err)}
		}
		if n != p.ManifestBytes || sum != p.ManifestSHA256 {
			return nil, &CorruptError{File: p.Manifest, Reason: fmt.Sprintf("%d bytes with SHA-256 %s, the cluster manifest says %d and %s", n, sum, p.ManifestBytes, p.ManifestSHA256)}
		}
		return Open(ctx, store, PartPrefix(m.ID, collection))
	}
	return nil, fmt.Errorf("cluster backup %s holds no collection %q: %w", m.ID, collection, fs.ErrNotExist)
}

// ListCluster returns the complete cluster backups, oldest first.
func ListCluster(ctx context.Context, store Store) ([]ClusterManifest, error) {
	ids, err := store.List(ctx, ClusterDir)
	if err != nil {
		return nil, err
	}
	var out []ClusterManifest
	for _, id := range ids {
		m, err := OpenCluster(ctx, store, id)
		if errors.Is(err, fs.ErrNotExist) {
			continue // unfinished, or being written
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
