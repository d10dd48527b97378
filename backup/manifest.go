package backup

import (
	"encoding/json"
	"fmt"
	"time"
)

// Format and Version name this package's layout in every manifest. A
// reader refuses another format or a newer version rather than guess.
// Version 2 added each shard's int8 codes (Shard.Codes); a version 1
// backup has none and reads as before.
const (
	Format  = "trawl-backup"
	Version = 2
)

// ManifestFile is the manifest's name inside a backup.
const ManifestFile = "manifest.json"

// Manifest describes one backup. It is written last: a backup without
// one is incomplete and is neither listed nor restored.
type Manifest struct {
	Format     string    `json:"format"`
	Version    int       `json:"version"`
	ID         string    `json:"id"`
	Collection string    `json:"collection"`
	Created    time.Time `json:"created"`
	// Settings is the collection's catalog entry at the cut.
	Settings Settings `json:"settings"`
	// PayloadSchema is the payload index declarations (key → type).
	PayloadSchema map[string]string `json:"payload_schema,omitempty"`
	// SlotMap is the collection's slot map at the cut (absent for a
	// collection placed by jump hash over its shard names).
	SlotMap *SlotMap `json:"slot_map,omitempty"`
	// Shards are the source shards, each with the raft index of its cut.
	Shards []Shard `json:"shards"`
	// Files is every other file of the backup, with its size and digest.
	Files []File `json:"files"`
}

// Settings are a collection's settings, as the native API spells them.
type Settings struct {
	Dimension    int    `json:"dimension"`
	Metric       string `json:"metric"`
	Quantization string `json:"quantization"`
	Index        string `json:"index"`
	Float32      string `json:"float32"`
}

// SlotMap is a collection's slot → shard map.
type SlotMap struct {
	Epoch  uint64   `json:"epoch"`
	Owners []string `json:"owners"`
}

// Shard is one source shard's part of a backup.
type Shard struct {
	Name string `json:"name"`
	// Index is the raft log index of this shard group's backup cut: the
	// rows are the collection's exactly as the group had applied it.
	Index uint64 `json:"raft_index"`
	Rows  int64  `json:"rows"`
	// Vectors names the .npy file of the rows (float32 [rows, dim], C
	// order, little-endian); Points the JSON Lines file of their ids and
	// payloads, one line per row in the same order.
	Vectors string `json:"vectors"`
	Points  string `json:"points"`
	// Codes names the .npy file of the rows' int8 codes (int8 [rows,
	// dim], C order), and Steps the .npy of the int8 scale's step per
	// dimension (float32 [dim]): element d of a row is about
	// codes[d]·steps[d]. Present (version 2) when the collection is int8
	// and its group had committed a scale by the cut.
	Codes string `json:"codes,omitempty"`
	Steps string `json:"steps,omitempty"`
}

// File is one file of a backup.
type File struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Point is one line of a shard's points file.
type Point struct {
	ID      string          `json:"id"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// check refuses a manifest this code cannot read, naming what is wrong.
func (m *Manifest) check() error {
	if m.Format != Format {
		return fmt.Errorf("%s: format %q is not a trawl backup (%q)", ManifestFile, m.Format, Format)
	}
	if m.Version < 1 || m.Version > Version {
		return fmt.Errorf("%s: version %d is not supported (this trawl reads up to %d)", ManifestFile, m.Version, Version)
	}
	if m.Settings.Dimension < 1 {
		return fmt.Errorf("%s: settings.dimension %d", ManifestFile, m.Settings.Dimension)
	}
	known := map[string]bool{}
	for _, f := range m.Files {
		known[f.Name] = true
	}
	for _, s := range m.Shards {
		names := []string{s.Vectors, s.Points}
		if s.Codes != "" || s.Steps != "" {
			names = append(names, s.Codes, s.Steps)
		}
		for _, n := range names {
			if !known[n] {
				return fmt.Errorf("%s: shard %s names %q, which files does not list", ManifestFile, s.Name, n)
			}
		}
	}
	return nil
}
