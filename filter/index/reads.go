package index

import (
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
)

// Counts returns, for every string, integer and boolean value held at
// key, how many rows of within (nil: every row) hold it: a row counts
// once per distinct value, whatever an array repeats. ok is false when
// the index cannot say exactly (the key cap left keys out, or some of the
// key's strings were too long to index); the caller then counts from the
// payloads.
func (ix *Index) Counts(key string, within *roaring.Bitmap) (counts map[any]int, ok bool) {
	f, found := ix.fields[key]
	if !found {
		return map[any]int{}, !ix.capped
	}
	if f.long {
		return nil, false
	}
	count := func(b *roaring.Bitmap) int {
		if b == nil {
			return 0
		}
		if within == nil {
			return int(b.GetCardinality())
		}
		return int(b.AndCardinality(within))
	}
	counts = map[any]int{}
	for s, b := range f.strs {
		if n := count(b); n > 0 {
			counts[s] = n
		}
	}
	for i, b := range f.ints {
		if n := count(b); n > 0 {
			counts[i] = n
		}
	}
	for i, b := range f.bools {
		if n := count(b); n > 0 {
			counts[i == 1] = n
		}
	}
	return counts, true
}

// Ordered calls fn with every number held at key, in ascending order
// (descending when desc), from from on when it is set (>= ascending, <=
// descending), with the rows holding it and those holding it as an
// integer; fn returns false to stop. ok is false when the index cannot
// list the key whole (the key cap left keys out, or keys added since
// the last Flush): the caller then reads the payloads.
func (ix *Index) Ordered(key string, desc bool, from *float64, fn func(v float64, rows, ints *roaring.Bitmap) bool) (ok bool) {
	f, found := ix.fields[key]
	if !found {
		return !ix.capped
	}
	if len(f.pending) > 0 {
		return false
	}
	keys := f.keys
	if from != nil {
		if desc {
			keys = keys[:sort.Search(len(keys), func(i int) bool { return keys[i] > *from })]
		} else {
			keys = keys[sort.SearchFloat64s(keys, *from):]
		}
	}
	for i := range keys {
		k := keys[i]
		if desc {
			k = keys[len(keys)-1-i]
		}
		b, live := f.nums[k]
		if !live {
			continue // emptied since the keys were sorted
		}
		var ints *roaring.Bitmap
		if x := int64(k); float64(x) == k {
			ints = f.ints[x]
		}
		if !fn(k, b, ints) {
			break
		}
	}
	return true
}
