package index

import "github.com/RoaringBitmap/roaring/v2"

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
