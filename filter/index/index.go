// Package index keeps per-key indexes of a shard's payloads, so a filter
// costs in proportion to the rows it keeps rather than the shard: for each
// dotted key that payloads hold, roaring bitmaps of row numbers by string,
// integer and boolean value, numbers in a sorted structure for ranges, and
// which rows hold the key at all (present, null). Select plans a filter
// over them and falls back to evaluating payloads row by row (filter.Match)
// only where the indexes do not answer a condition, or where answering it
// would cost more than checking the few rows the rest of the filter left.
//
// match.text and match.text_any conditions that carry a text index
// (filter.Condition.TextIndex) are answered from token postings: for each
// key and tokenizer, a roaring bitmap of rows per token, built from the
// payloads by the first Select that needs it and kept up to date by Add
// and Remove from then on (text.go).
//
// Keys are indexed as they first appear, up to a cap on the number of
// keys; a key met after that is not indexed, and conditions on it are
// evaluated per row. The result is the same either way: filter.Match is
// the definition, the indexes an accelerated copy of it.
//
// An Index mirrors a store's rows by number, and is not safe for
// concurrent use: the store guards it as it guards its rows (writes
// exclusive, Select shared). It must not import any trawl package other
// than filter.
package index

import (
	"slices"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
)

// Defaults for Config.
const (
	// DefaultMaxKeys bounds the distinct dotted keys indexed: payloads
	// are schemaless, and a client writing a new key per document must
	// not grow the index without bound.
	DefaultMaxKeys = 1024
	// DefaultMaxStringBytes is the longest string indexed by value: a
	// text field of kilobytes per document would double the payloads'
	// memory and is never matched by keyword. A condition that needs a
	// longer string is evaluated per row.
	DefaultMaxStringBytes = 128
)

// Config tunes an Index; zero fields take the defaults.
type Config struct {
	MaxKeys        int
	MaxStringBytes int
}

// Index is the per-key payload index of one store's rows.
type Index struct {
	cfg    Config
	fields map[string]*field
	// capped is set once a key was refused for the cap: a key absent
	// from fields may then be held by rows after all.
	capped bool
	// texts are the text indexes (token postings) built so far, each on
	// the first Select whose filter needs it and kept up to date by Add
	// and Remove from then on. textMu guards the map: Select builds
	// under the store's shared hold, concurrently with other Selects.
	textMu sync.Mutex
	texts  map[textKey]*textPostings
}

// field is one dotted key's postings.
type field struct {
	present *roaring.Bitmap // value neither null nor []
	null    *roaring.Bitmap // value null
	// other holds the rows with a value (or an array element) that is
	// neither a string, an integer nor null: a boolean, a float, an
	// object. Those are outside every except list.
	other *roaring.Bitmap
	strs  map[string]*roaring.Bitmap
	ints  map[int64]*roaring.Bitmap
	nums  map[float64]*roaring.Bitmap // integers too, as float64, for ranges
	bools [2]*roaring.Bitmap
	// long is set once a string longer than MaxStringBytes went
	// unindexed: strs then does not hold every string of the key.
	long bool
	// keys are nums' keys sorted (after Flush), possibly with keys since
	// emptied (stale of them); pending are keys added since Flush.
	keys    []float64
	pending []float64
	stale   int
}

// New returns an empty index.
func New(cfg Config) *Index {
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.MaxStringBytes <= 0 {
		cfg.MaxStringBytes = DefaultMaxStringBytes
	}
	return &Index{cfg: cfg, fields: map[string]*field{}}
}

// Reset empties the index.
func (ix *Index) Reset() {
	ix.fields = map[string]*field{}
	ix.capped = false
	ix.textMu.Lock()
	ix.texts = nil
	ix.textMu.Unlock()
}

// Keys is how many dotted keys are indexed.
func (ix *Index) Keys() int { return len(ix.fields) }

// Add indexes doc (filter.DecodePayload's tree; nil for none) as row's.
func (ix *Index) Add(row uint32, doc map[string]any) {
	ix.walk("", doc, row, true)
	ix.updateTexts(row, doc, true)
}

// Remove takes row's entries for doc (what Add was given) out.
func (ix *Index) Remove(row uint32, doc map[string]any) {
	ix.walk("", doc, row, false)
	ix.updateTexts(row, doc, false)
}

// walk visits every key path of an object the way filter.Lookup reaches
// them: through objects only, by keys without dots (a key holding a dot,
// or empty, is out of any filter's reach, and so out of the index).
func (ix *Index) walk(prefix string, obj map[string]any, row uint32, add bool) {
	for k, v := range obj {
		if k == "" || strings.Contains(k, ".") {
			continue
		}
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		f := ix.field(p, add)
		if f == nil {
			continue
		}
		switch v := v.(type) {
		case nil:
			f.null = update(f.null, row, add)
			continue
		case []any:
			if len(v) == 0 {
				continue
			}
			for _, e := range v {
				ix.scalar(f, e, row, add)
			}
		case map[string]any:
			ix.walk(p, v, row, add)
			f.other = update(f.other, row, add)
		default:
			ix.scalar(f, v, row, add)
		}
		f.present = update(f.present, row, add)
	}
}

// field finds p's postings, making them when adding unless the cap is
// reached; nil means p is not indexed.
func (ix *Index) field(p string, add bool) *field {
	if f, ok := ix.fields[p]; ok {
		return f
	}
	if !add {
		return nil
	}
	if len(ix.fields) >= ix.cfg.MaxKeys {
		ix.capped = true
		return nil
	}
	f := &field{}
	ix.fields[p] = f
	return f
}

// scalar indexes one value or array element (an object element only as
// other: keys inside arrays are reached by nested conditions, evaluated
// per row).
func (ix *Index) scalar(f *field, v any, row uint32, add bool) {
	switch v := v.(type) {
	case map[string]any:
		f.other = update(f.other, row, add)
	case string:
		if len(v) > ix.cfg.MaxStringBytes {
			f.long = true
			return
		}
		f.strs = updateMap(f.strs, v, row, add, nil)
	case int64:
		f.ints = updateMap(f.ints, v, row, add, nil)
		f.nums = updateMap(f.nums, float64(v), row, add, f)
	case float64:
		f.nums = updateMap(f.nums, v, row, add, f)
		f.other = update(f.other, row, add)
	case bool:
		i := 0
		if v {
			i = 1
		}
		f.bools[i] = update(f.bools[i], row, add)
		f.other = update(f.other, row, add)
	}
}

func update(b *roaring.Bitmap, row uint32, add bool) *roaring.Bitmap {
	if add {
		if b == nil {
			b = roaring.New()
		}
		b.Add(row)
	} else if b != nil {
		b.Remove(row)
	}
	return b
}

// updateMap adds or removes row under key k; numeric, when set, is the
// field whose sorted keys follow a float map.
func updateMap[K comparable](m map[K]*roaring.Bitmap, k K, row uint32, add bool, numeric *field) map[K]*roaring.Bitmap {
	if add {
		if m == nil {
			m = map[K]*roaring.Bitmap{}
		}
		b, ok := m[k]
		if !ok {
			b = roaring.New()
			m[k] = b
			if numeric != nil {
				numeric.pending = append(numeric.pending, any(k).(float64))
			}
		}
		b.Add(row)
		return m
	}
	b, ok := m[k]
	if !ok {
		return m
	}
	b.Remove(row)
	if b.IsEmpty() {
		delete(m, k)
		if numeric != nil {
			numeric.stale++
		}
	}
	return m
}

// Flush brings the sorted numeric keys up to date; call it after a batch
// of Add and Remove, before the next Select.
func (ix *Index) Flush() {
	for _, f := range ix.fields {
		f.flush()
	}
}

func (f *field) flush() {
	if len(f.pending) == 0 && f.stale*2 <= len(f.keys) {
		return
	}
	if f.stale*2 > len(f.keys) {
		// Mostly stale: rebuild from the map.
		keys := make([]float64, 0, len(f.nums))
		for k := range f.nums {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		f.keys, f.pending, f.stale = keys, f.pending[:0], 0
		return
	}
	slices.Sort(f.pending)
	merged := make([]float64, 0, len(f.keys)+len(f.pending))
	i, j := 0, 0
	for i < len(f.keys) || j < len(f.pending) {
		var k float64
		switch {
		case j >= len(f.pending) || (i < len(f.keys) && f.keys[i] <= f.pending[j]):
			k = f.keys[i]
			i++
		default:
			k = f.pending[j]
			j++
		}
		if n := len(merged); n > 0 && merged[n-1] == k {
			continue
		}
		merged = append(merged, k)
	}
	f.keys, f.pending = merged, f.pending[:0]
}
