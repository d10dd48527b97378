package store

import (
	"container/heap"
	"slices"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/idorder"
)

// Page is one page of a listing in id order (package idorder).
type Page struct {
	// Records are the page's documents, in id order, each with its payload
	// and a copy of its vector only when asked.
	Records []Record
	// Count is every document the filter matches, whatever the page.
	Count int
	// Docs is the store's size when it answered.
	Docs int
}

// PageRequest asks for a page: the documents f matches (nil: all) from
// the id From on (inclusive, when HasFrom), at most Limit of them (0:
// count only).
type PageRequest struct {
	Filter     *filter.Filter
	From       string
	HasFrom    bool
	Limit      int
	WithVector bool
	// Payload: nil returns no payload; Keys nil all of it; else those
	// top-level keys.
	Payload *PayloadKeys
	// Keep, when set, leaves out (of the page and the count) every
	// document it is false for: a shard answers for some hash slots only.
	Keep func(id string) bool
}

// PayloadKeys selects a payload's top-level keys; Keys nil is all of it.
type PayloadKeys struct{ Keys []string }

// Page lists one page under the read lock. It keeps only the Limit
// smallest ids from From on (a bounded heap), so a page costs a pass over
// the matching rows and Limit·log(Limit), not a sort of the shard.
func (m *Memory) Page(req PageRequest) (Page, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var rows []uint32 // nil: every row
	if !req.Filter.Empty() {
		rows = m.selectRows(req.Filter).ToArray()
	}
	if req.Keep != nil {
		rows = keepRows(m.ids, rows, req.Keep)
	}
	out := Page{Docs: len(m.ids), Count: len(m.ids)}
	if rows != nil {
		out.Count = len(rows)
	}
	if req.Limit <= 0 {
		return out, nil
	}
	h := &maxIDs{ids: m.ids}
	consider := func(row int) {
		id := m.ids[row]
		if req.HasFrom && idorder.Compare(id, req.From) < 0 {
			return
		}
		if h.Len() < req.Limit {
			heap.Push(h, row)
			return
		}
		if idorder.Compare(id, m.ids[h.rows[0]]) < 0 {
			h.rows[0] = row
			heap.Fix(h, 0)
		}
	}
	if rows != nil {
		for _, r := range rows {
			consider(int(r))
		}
	} else {
		for r := range m.ids {
			consider(r)
		}
	}
	slices.SortFunc(h.rows, func(a, b int) int { return idorder.Compare(m.ids[a], m.ids[b]) })
	out.Records = make([]Record, len(h.rows))
	for i, r := range h.rows {
		rec := Record{ID: m.ids[r]}
		if req.WithVector {
			rec.Vector = slices.Clone(m.row(r)[:m.dim])
			rec.Sparse = m.sparseOf(r)
			rec.Named = m.namedOf(r)
		}
		if req.Payload != nil {
			p, err := projectPayload(m.payloads[r], req.Payload.Keys)
			if err != nil {
				return Page{}, err
			}
			rec.Payload = p
		}
		out.Records[i] = rec
	}
	return out, nil
}

// maxIDs is a max-heap of rows by their ids' order: its top is the
// largest id kept, the one a smaller id replaces.
type maxIDs struct {
	ids  []string
	rows []int
}

func (h *maxIDs) Len() int           { return len(h.rows) }
func (h *maxIDs) Less(i, j int) bool { return idorder.Compare(h.ids[h.rows[i]], h.ids[h.rows[j]]) > 0 }
func (h *maxIDs) Swap(i, j int)      { h.rows[i], h.rows[j] = h.rows[j], h.rows[i] }
func (h *maxIDs) Push(x any)         { h.rows = append(h.rows, x.(int)) }
func (h *maxIDs) Pop() any {
	x := h.rows[len(h.rows)-1]
	h.rows = h.rows[:len(h.rows)-1]
	return x
}

// keepRows is the rows of within (every row when nil) whose ids keep is
// true for, ascending, never nil.
func keepRows(ids []string, within []uint32, keep func(string) bool) []uint32 {
	out := make([]uint32, 0, len(within))
	if within == nil {
		for r, id := range ids {
			if keep(id) {
				out = append(out, uint32(r))
			}
		}
		return out
	}
	for _, r := range within {
		if keep(ids[r]) {
			out = append(out, r)
		}
	}
	return out
}
