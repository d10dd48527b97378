package store

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/idorder"
)

// FacetRequest asks for the value counts of one payload key over the
// documents Filter matches (nil: all).
type FacetRequest struct {
	Filter *filter.Filter
	// Path is the key's dotted path, split (filter.Lookup's form).
	Path []string
	// Keep as in PageRequest.
	Keep func(id string) bool
}

// FacetValue is a counted payload value: a string, an int64 or a bool
// (the payload types Qdrant's facet counts; floats, nulls and objects
// are not counted).
type FacetValue = any

// Facets is a facet's answer.
type Facets struct {
	// Counts maps every value the matching documents hold under the key
	// to how many of them hold it.
	Counts map[FacetValue]int
	// Docs is the store's size when it answered.
	Docs int
}

// Facet counts, under the read lock, how many matching documents hold
// each value at req.Path. An array counts each distinct value it holds
// once for its document, as Qdrant's facet index does. The counts come
// from the payload index's postings when it holds the key whole (a
// cardinality per value), else from the matching payloads.
func (m *Memory) Facet(req FacetRequest) Facets {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := Facets{Docs: len(m.ids)}
	var within *roaring.Bitmap // nil: every row
	if !req.Filter.Empty() {
		within = m.payloadIndex.Select(req.Filter, len(m.ids),
			func(row uint32) map[string]any { return decodePayload(m.payloads[row]) })
	}
	if req.Keep != nil {
		var rows []uint32
		if within != nil {
			rows = within.ToArray()
		}
		within = roaring.BitmapOf(keepRows(m.ids, rows, req.Keep)...)
	}
	if counts, ok := m.payloadIndex.Counts(strings.Join(req.Path, "."), within); ok {
		out.Counts = counts
		return out
	}
	out.Counts = map[FacetValue]int{}
	var seen []FacetValue // one document's distinct values, reused
	count := func(row int) {
		v, ok := filter.Lookup(decodePayload(m.payloads[row]), req.Path)
		if !ok {
			return
		}
		a, isArr := v.([]any)
		if !isArr {
			if facetable(v) {
				out.Counts[v]++
			}
			return
		}
		seen = seen[:0]
		for _, e := range a {
			if facetable(e) && !slices.Contains(seen, e) {
				seen = append(seen, e)
				out.Counts[e]++
			}
		}
	}
	if within == nil {
		for r := range m.ids {
			count(r)
		}
		return out
	}
	for it := within.Iterator(); it.HasNext(); {
		count(int(it.Next()))
	}
	return out
}

func facetable(v any) bool {
	switch v.(type) {
	case string, int64, bool:
		return true
	}
	return false
}

// eachMatching calls fn with every row f (nil: every row) and keep (nil:
// every id) select, in row order. m.mu must be held.
func (m *Memory) eachMatching(f *filter.Filter, keep func(string) bool, fn func(row int)) {
	var rows []uint32 // nil: every row
	if !f.Empty() {
		rows = m.payloadIndex.Select(f, len(m.ids),
			func(row uint32) map[string]any { return decodePayload(m.payloads[row]) }).ToArray()
	}
	if keep != nil {
		rows = keepRows(m.ids, rows, keep)
	}
	if rows == nil {
		for r := range m.ids {
			fn(r)
		}
		return
	}
	for _, r := range rows {
		fn(int(r))
	}
}

// OrderedPageRequest asks for a page in the order of a payload key's
// numeric values.
type OrderedPageRequest struct {
	Filter *filter.Filter
	// Path is the key's dotted path, split.
	Path       []string
	Descending bool
	// From, when HasFrom, keeps only values >= From (ascending) or <= From
	// (descending).
	From    float64
	HasFrom bool
	// Limit is the page size, at least 1.
	Limit      int
	WithVector bool
	Payload    *PayloadKeys
	Keep       func(id string) bool
}

// OrderedRecord is a listed document and the value it was listed by.
type OrderedRecord struct {
	Record
	Value float64
	// Integer: the payload held the value as an integer.
	Integer bool
}

// OrderedPage is a page of an ordered listing.
type OrderedPage struct {
	Records []OrderedRecord
	Docs    int
}

// orderKey is one (value, row) pair of an ordered listing.
type orderKey struct {
	value   float64
	row     int
	integer bool
}

// OrderedPage lists, under the read lock, the first Limit (value, id)
// pairs of the matching documents in the order asked: a document appears
// once for each distinct number it holds at Path (an array of numbers:
// once per distinct element), as Qdrant's order_by lists it after its
// merge drops repeated (value, id) pairs; one without a number there is
// left out. Ties of value are broken by id, ascending or descending with
// the direction (Qdrant's merge order).
func (m *Memory) OrderedPage(req OrderedPageRequest) (OrderedPage, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := OrderedPage{Docs: len(m.ids)}
	if req.Limit <= 0 {
		return out, nil
	}
	less := func(a, b orderKey) int { // the listing's order: <0 when a comes first
		c := cmp.Compare(a.value, b.value)
		if c == 0 {
			c = idorder.Compare(m.ids[a.row], m.ids[b.row])
		}
		if req.Descending {
			c = -c
		}
		return c
	}
	h := &lastKeys{less: less}
	consider := func(k orderKey) {
		if req.HasFrom && (!req.Descending && k.value < req.From || req.Descending && k.value > req.From) {
			return
		}
		if h.Len() < req.Limit {
			heap.Push(h, k)
			return
		}
		if less(k, h.keys[0]) < 0 {
			h.keys[0] = k
			heap.Fix(h, 0)
		}
	}
	var seen []float64 // one document's distinct values, reused
	m.eachMatching(req.Filter, req.Keep, func(row int) {
		v, ok := filter.Lookup(decodePayload(m.payloads[row]), req.Path)
		if !ok {
			return
		}
		if a, isArr := v.([]any); isArr {
			seen = seen[:0]
			for _, e := range a {
				if x, isInt, ok := orderValue(e); ok && !slices.Contains(seen, x) {
					seen = append(seen, x)
					consider(orderKey{x, row, isInt})
				}
			}
			return
		}
		if x, isInt, ok := orderValue(v); ok {
			consider(orderKey{x, row, isInt})
		}
	})
	slices.SortFunc(h.keys, less)
	out.Records = make([]OrderedRecord, len(h.keys))
	for i, k := range h.keys {
		rec := Record{ID: m.ids[k.row]}
		if req.WithVector {
			rec.Vector = slices.Clone(m.row(k.row))
		}
		if req.Payload != nil {
			p, err := projectPayload(m.payloads[k.row], req.Payload.Keys)
			if err != nil {
				return OrderedPage{}, err
			}
			rec.Payload = p
		}
		out.Records[i] = OrderedRecord{Record: rec, Value: k.value, Integer: k.integer}
	}
	return out, nil
}

// orderValue is a payload scalar's ordering value: a number's (an
// integer beyond 2^53 orders as its nearest float64).
func orderValue(v any) (x float64, integer, ok bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true, true
	case float64:
		return x, false, !math.IsNaN(x)
	}
	return 0, false, false
}

// lastKeys is a heap whose top is the key listed last of those kept: the
// one a key listed earlier replaces.
type lastKeys struct {
	keys []orderKey
	less func(a, b orderKey) int
}

func (h *lastKeys) Len() int           { return len(h.keys) }
func (h *lastKeys) Less(i, j int) bool { return h.less(h.keys[i], h.keys[j]) > 0 }
func (h *lastKeys) Swap(i, j int)      { h.keys[i], h.keys[j] = h.keys[j], h.keys[i] }
func (h *lastKeys) Push(x any)         { h.keys = append(h.keys, x.(orderKey)) }
func (h *lastKeys) Pop() any {
	x := h.keys[len(h.keys)-1]
	h.keys = h.keys[:len(h.keys)-1]
	return x
}
