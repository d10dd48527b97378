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
	within := m.matching(req.Filter, req.Keep)
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
	m.eachRow(within, count)
	return out
}

func facetable(v any) bool {
	switch v.(type) {
	case string, int64, bool:
		return true
	}
	return false
}

// matching is the rows f (nil: every row) and keep (nil: every id)
// select; nil when that is every row. m.mu must be held.
func (m *Memory) matching(f *filter.Filter, keep func(string) bool) *roaring.Bitmap {
	var within *roaring.Bitmap
	if !f.Empty() {
		within = m.selectRows(f) // has_id included
	}
	if keep != nil {
		var rows []uint32
		if within != nil {
			rows = within.ToArray()
		}
		within = roaring.BitmapOf(keepRows(m.ids, rows, keep)...)
	}
	return within
}

// eachRow calls fn with every row of within (nil: every row), in row
// order.
func (m *Memory) eachRow(within *roaring.Bitmap, fn func(row int)) {
	if within == nil {
		for r := range m.ids {
			fn(r)
		}
		return
	}
	for it := within.Iterator(); it.HasNext(); {
		fn(int(it.Next()))
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
// the direction (Qdrant's merge order). It walks the payload index's
// sorted numbers when the index holds the key whole, so a page costs
// about the rows it lists; otherwise it reads every matching payload.
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
	within := m.matching(req.Filter, req.Keep)
	keys, ok := m.orderedFromIndex(req, within, less)
	if !ok {
		keys = m.orderedFromPayloads(req, within, less)
	}
	out.Records = make([]OrderedRecord, len(keys))
	for i, k := range keys {
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

// orderedFromIndex lists the page's keys from the payload index's
// sorted numbers, one value's rows at a time, until Limit are listed;
// false when the index cannot list the key whole.
func (m *Memory) orderedFromIndex(req OrderedPageRequest, within *roaring.Bitmap, less func(a, b orderKey) int) ([]orderKey, bool) {
	var from *float64
	if req.HasFrom {
		from = &req.From
	}
	var keys []orderKey
	ok := m.payloadIndex.Ordered(strings.Join(req.Path, "."), req.Descending, from, func(v float64, rows, ints *roaring.Bitmap) bool {
		if within != nil {
			rows = roaring.And(rows, within)
		}
		n := len(keys)
		for it := rows.Iterator(); it.HasNext(); {
			row := it.Next()
			keys = append(keys, orderKey{v, int(row), ints != nil && ints.Contains(row)})
		}
		slices.SortFunc(keys[n:], less) // one value: by id
		return len(keys) < req.Limit
	})
	if !ok {
		return nil, false
	}
	return keys[:min(len(keys), req.Limit)], true
}

// orderedFromPayloads lists the page's keys from the matching payloads,
// keeping the Limit first in a bounded heap.
func (m *Memory) orderedFromPayloads(req OrderedPageRequest, within *roaring.Bitmap, less func(a, b orderKey) int) []orderKey {
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
	m.eachRow(within, func(row int) {
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
	return h.keys
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
