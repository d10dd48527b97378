package vector

import "math"

// TopK keeps the k best candidates seen so far. Candidates carry a row
// number and a key where larger is better; ties on the key are broken by
// id ascending, looked up only when keys tie (rare), so the common path
// compares one float.
//
// The heap is a min-heap on rank: the root is the worst kept candidate, so a
// new candidate is rejected with one comparison against it.
type TopK struct {
	k    int
	ids  []string
	rows []int32
	keys []float32
}

// NewTopK returns a selector of the best k rows; ids resolves a row's id
// for tie-breaking.
func NewTopK(k int, ids []string) *TopK {
	k = max(k, 0)
	return &TopK{k: k, ids: ids, rows: make([]int32, 0, k), keys: make([]float32, 0, k)}
}

// Reset empties the selector for reuse with a new id table.
func (t *TopK) Reset(ids []string) {
	t.ids = ids
	t.rows = t.rows[:0]
	t.keys = t.keys[:0]
}

// worse reports whether candidate i ranks after candidate j.
func (t *TopK) worse(ki float32, ri int32, kj float32, rj int32) bool {
	if ki != kj {
		return ki < kj
	}
	return t.ids[ri] > t.ids[rj]
}

// Push offers a row with key (larger is better). NaN keys are dropped.
func (t *TopK) Push(row int32, key float32) {
	if key != key || t.k == 0 {
		return
	}
	if len(t.rows) < t.k {
		t.rows = append(t.rows, row)
		t.keys = append(t.keys, key)
		t.up(len(t.rows) - 1)
		return
	}
	if !t.worse(t.keys[0], t.rows[0], key, row) {
		return
	}
	t.rows[0], t.keys[0] = row, key
	t.down(0)
}

// Threshold is the key a candidate must beat to enter once the selector is
// full, or -Inf-like false when it is not full yet.
func (t *TopK) Threshold() (float32, bool) {
	if t.k == 0 {
		return float32(math.Inf(1)), true // nothing can enter
	}
	if len(t.rows) < t.k {
		return 0, false
	}
	return t.keys[0], true
}

func (t *TopK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.worse(t.keys[i], t.rows[i], t.keys[p], t.rows[p]) {
			break
		}
		t.swap(i, p)
		i = p
	}
}

func (t *TopK) down(i int) {
	n := len(t.rows)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		w := l
		if r := l + 1; r < n && t.worse(t.keys[r], t.rows[r], t.keys[l], t.rows[l]) {
			w = r
		}
		if !t.worse(t.keys[w], t.rows[w], t.keys[i], t.rows[i]) {
			return
		}
		t.swap(i, w)
		i = w
	}
}

func (t *TopK) swap(i, j int) {
	t.rows[i], t.rows[j] = t.rows[j], t.rows[i]
	t.keys[i], t.keys[j] = t.keys[j], t.keys[i]
}

// Len is the number of candidates kept.
func (t *TopK) Len() int { return len(t.rows) }

// Sorted drains the selector best first, as rows and keys.
func (t *TopK) Sorted() (rows []int32, keys []float32) {
	n := len(t.rows)
	rows, keys = make([]int32, n), make([]float32, n)
	for i := n - 1; i >= 0; i-- {
		rows[i], keys[i] = t.rows[0], t.keys[0]
		last := len(t.rows) - 1
		t.swap(0, last)
		t.rows, t.keys = t.rows[:last], t.keys[:last]
		t.down(0)
	}
	return rows, keys
}

// Merge offers every candidate o holds to t (both select over the same
// ids), as a split scan combines its workers' selectors.
func (t *TopK) Merge(o *TopK) {
	for i, r := range o.rows {
		t.Push(r, o.keys[i])
	}
}
