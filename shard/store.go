package shard

import (
	"context"
	"sync"

	"github.com/trawl-search/trawl/vector"
)

// Record is one stored vector.
type Record struct {
	ID     string
	Vector []float32
}

// Placement is the shard list a replica's data was written under.
type Placement struct {
	Fingerprint string
	Shard       string
}

// Store holds one replica's vectors. The in-memory Memory is the index every
// store scans; a durable store (its own issue) wraps it and acknowledges a
// write only once it is on disk.
type Store interface {
	// Upsert stores records, replacing any with the same id, atomically
	// with recording the placement they were written under.
	Upsert(ctx context.Context, p Placement, recs []Record) error
	// Delete removes id and reports whether it was there.
	Delete(ctx context.Context, p Placement, id string) (bool, error)
	// Get returns a copy of id's vector.
	Get(id string) ([]float32, bool)
	// View runs fn with a consistent read-only view of every row; writes
	// wait until fn returns, so fn must not retain the rows.
	View(fn func(vector.Rows) error) error
	// Len is the number of stored vectors.
	Len() int
	// Placement is the placement of the last write, zero before any.
	Placement() Placement
}

// Memory is a Store in one growable 64-byte-aligned arena. Deleting swaps the
// last row into the hole, so rows stay dense.
type Memory struct {
	dim int

	mu        sync.RWMutex
	data      []float32 // len = rows*dim, cap a multiple of dim
	ids       []string
	index     map[string]int
	placement Placement
}

// NewMemory returns an empty store of dim-dimensional vectors.
func NewMemory(dim int) *Memory {
	return &Memory{dim: dim, data: vector.Aligned(0), index: map[string]int{}}
}

// Upsert implements Store.
func (m *Memory) Upsert(_ context.Context, p Placement, recs []Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.placement = p
	for _, r := range recs {
		if i, ok := m.index[r.ID]; ok {
			copy(m.data[i*m.dim:(i+1)*m.dim], r.Vector)
			continue
		}
		m.grow(1)
		m.index[r.ID] = len(m.ids)
		m.ids = append(m.ids, r.ID)
		m.data = append(m.data, r.Vector...)
	}
	return nil
}

// grow makes room for n more rows without leaving the aligned arena: append
// on a full slice would reallocate without the alignment.
func (m *Memory) grow(n int) {
	need := len(m.data) + n*m.dim
	if need <= cap(m.data) {
		return
	}
	rows := max(2*cap(m.data)/m.dim, 1024, need/m.dim)
	next := vector.Aligned(rows * m.dim)[:len(m.data)]
	copy(next, m.data)
	m.data = next
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, p Placement, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.placement = p
	i, ok := m.index[id]
	if !ok {
		return false, nil
	}
	last := len(m.ids) - 1
	if i != last {
		copy(m.data[i*m.dim:(i+1)*m.dim], m.data[last*m.dim:])
		m.ids[i] = m.ids[last]
		m.index[m.ids[i]] = i
	}
	m.ids = m.ids[:last]
	m.data = m.data[:last*m.dim]
	delete(m.index, id)
	return true, nil
}

// Get implements Store.
func (m *Memory) Get(id string) ([]float32, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i, ok := m.index[id]
	if !ok {
		return nil, false
	}
	out := make([]float32, m.dim)
	copy(out, m.data[i*m.dim:])
	return out, true
}

// View implements Store.
func (m *Memory) View(fn func(vector.Rows) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(vector.Rows{Data: m.data, Dim: m.dim, IDs: m.ids})
}

// Len implements Store.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.ids)
}

// Placement implements Store.
func (m *Memory) Placement() Placement {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.placement
}
