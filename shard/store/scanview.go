package store

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
	"github.com/trawl-search/trawl/vector/quant"
)

// ScanView is what one scan reads while the store's read lock is held:
// the rows, their int8 codes (nil when there are none), and the payloads
// with their index, for filters and with_payload. It must not be kept
// past the call that handed it out.
type ScanView struct {
	Rows  vector.Rows
	Codes *quant.Codes
	// IVF is the index IVF queries probe, nil when there is none (a flat
	// store, or no index built yet).
	IVF *ivf.Index
	m   *Memory
}

// ViewScan runs fn with a ScanView under the read lock; writes wait until
// it returns.
func (m *Memory) ViewScan(fn func(*ScanView) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(&ScanView{Rows: m.rowsView(), Codes: m.codes, IVF: m.ivf.x, m: m})
}

// Select returns the rows whose payloads match f, ascending: from the
// payload index where it answers, by evaluating payloads row by row where
// it does not.
func (v *ScanView) Select(f *filter.Filter) ([]uint32, error) {
	m := v.m
	b := m.selectRows(f)
	return b.ToArray(), nil
}

// Keep returns the rows of within (every row when nil) whose ids keep is
// true for, ascending and never nil: the rows of the hash slots a shard
// answers for, while it holds rows of others (a slot moving in or out).
func (v *ScanView) Keep(within []uint32, keep func(id string) bool) []uint32 {
	return keepRows(v.m.ids, within, keep)
}

// Payload returns id's payload as a hit carries it: all of it when keys
// is nil, else only those top-level keys the document has; "{}" for a
// document without payload.
func (v *ScanView) Payload(id string, keys []string) ([]byte, error) {
	i, ok := v.m.index[id]
	if !ok {
		return nil, errors.New("hit " + id + " is not in the store")
	}
	return projectPayload(v.m.payloads[i], keys)
}

// Vector returns the row of id as the scan read it (not a copy: encode it
// before the view is released).
func (v *ScanView) Vector(id string) ([]float32, error) {
	i, ok := v.m.index[id]
	if !ok {
		return nil, errors.New("hit " + id + " is not in the store")
	}
	return v.Rows.Row(i)[:v.m.dim], nil
}

// projectPayload keeps the listed top-level keys of a payload (all when
// keys is nil).
func projectPayload(p []byte, keys []string) ([]byte, error) {
	if len(p) == 0 {
		return []byte("{}"), nil
	}
	if keys == nil {
		return p, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(keys))
	for k, v := range obj {
		if slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return json.Marshal(out)
}
