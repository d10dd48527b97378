package ivf

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// Index partitions a shard's rows into inverted lists around committed
// centroids. It mirrors the shard's float32 arena row for row, as
// quant.Codes does: Append, Set and Delete do to the index what the shard
// does to its rows (Delete moves the last row into the hole), so row i of
// the index is row i of the floats. The floats themselves stay in the
// shard's arena; each list keeps the int8 codes of its rows contiguously
// (a probe is a sequential scan) and their row numbers, for re-scoring
// candidates from the arena.
//
// Which list a row is in depends only on the centroids and the row's
// vector (see coarse), so replicas that apply the same writes hold the
// same lists, and Build from the same centroids and rows gives the same
// lists on every replica. Within a list, deletes move the list's last row
// into the hole (no tombstones: a scan never reads a dead row, and there
// is no compaction to schedule), so after deletes the order of rows in a
// list follows the history of writes; answers do not depend on it,
// because candidates and hits are ranked by score, ties by id.
//
// Index is not safe for concurrent use; the caller guards it as it
// guards its rows (writes exclusive, searches shared).
type Index struct {
	f     vector.Kernel
	cent  Centroids
	co    *coarse
	scale quant.Scale
	lists []list
	where []slot // by row

	// nprobes are the defaults of queries that name none, by ascending
	// K, nil for DefaultNProbe(lists): a shard sets the levels its leader
	// measured for these centroids (CalibrateNProbe) and committed, so
	// every replica probes alike. Set only while no search runs (the
	// shard's write lock).
	nprobes []Level

	// Scratch for one write at a time (writes are exclusive).
	fast []float32
	cand []candidate
	one  []int32
}

// list is one inverted list: the codes of its rows, contiguous, and
// their row numbers, slot by slot.
type list struct {
	codes *quant.Codes
	rows  []int32
}

// slot is where a row is: its list and its position in it.
type slot struct{ list, pos int32 }

// New returns an empty index over centroids c whose lists keep codes
// encoded with s (the shard's committed int8 scale). f scores rows against
// the centroids to assign them; which kernel it is changes speed only,
// never an assignment.
func New(f vector.Kernel, c Centroids, s quant.Scale) (*Index, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if s.Dim() != c.Dim {
		return nil, fmt.Errorf("ivf: %d-D centroids with a %d-D int8 scale", c.Dim, s.Dim())
	}
	x := &Index{
		f: f, cent: c, co: newCoarse(c), scale: s,
		lists: make([]list, c.Lists()),
		fast:  make([]float32, c.Lists()),
	}
	for i := range x.lists {
		x.lists[i].codes = quant.NewCodesCap(s, 0)
	}
	return x, nil
}

// Build returns the index of every row of rows, as Append would build it
// row by row, but assigning and encoding on every core. Rows are appended
// to their lists in row order, so the lists of two replicas built from the
// same rows are identical slot for slot.
func Build(f vector.Kernel, c Centroids, s quant.Scale, rows vector.Rows) (*Index, error) {
	return buildLists(f, c, s, rows, nil)
}

// BuildAssigned is Build with each row's list given (Assignment of an
// index of the same centroids over the same rows, kept in a snapshot), so
// no row is assigned again: the rows are only encoded. The index trusts
// the lists as AppendAssigned does; a list out of range is an error.
func BuildAssigned(f vector.Kernel, c Centroids, s quant.Scale, rows vector.Rows, assign []int32) (*Index, error) {
	if len(assign) != rows.Len() {
		return nil, fmt.Errorf("ivf: %d lists for %d rows", len(assign), rows.Len())
	}
	for r, l := range assign {
		if l < 0 || int(l) >= c.Lists() {
			return nil, fmt.Errorf("ivf: row %d in list %d of %d", r, l, c.Lists())
		}
	}
	return buildLists(f, c, s, rows, assign)
}

// Assignment returns the list of every row, in row order (a copy).
func (x *Index) Assignment() []int32 {
	out := make([]int32, len(x.where))
	for r, s := range x.where {
		out[r] = s.list
	}
	return out
}

func buildLists(f vector.Kernel, c Centroids, s quant.Scale, rows vector.Rows, assign []int32) (*Index, error) {
	x, err := New(f, c, s)
	if err != nil {
		return nil, err
	}
	if rows.Dim != c.Dim {
		return nil, fmt.Errorf("ivf: %d-D rows with %d-D centroids", rows.Dim, c.Dim)
	}
	if err := rows.Check(); err != nil {
		return nil, fmt.Errorf("ivf: %w", err)
	}
	n := rows.Len()
	if assign == nil {
		assign = x.assignAll(rows)
	}
	counts := make([]int, len(x.lists))
	for _, l := range assign {
		counts[l]++
	}
	x.where = make([]slot, n)
	for i := range x.lists {
		x.lists[i].rows = make([]int32, 0, counts[i])
	}
	for r, l := range assign {
		li := &x.lists[l]
		x.where[r] = slot{list: l, pos: int32(len(li.rows))}
		li.rows = append(li.rows, int32(r))
	}
	// Encode list by list on every core; each list is one goroutine's.
	workers := max(1, min(runtime.GOMAXPROCS(0), n/minParallelRows))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for l := w; l < len(x.lists); l += workers {
				li := &x.lists[l]
				li.codes = quant.NewCodesCap(s, len(li.rows))
				for _, r := range li.rows {
					li.codes.Append(rows.Row(int(r)))
				}
			}
		})
	}
	wg.Wait()
	return x, nil
}

// minParallelRows is the fewest rows Build gives a goroutine.
const minParallelRows = 2048

// assignBlock is how many rows assignAll scores against the centroids per
// call: a multiple of six (the float32 tile's queries), 288 KiB of 1536-D
// rows that stay in L2 while every group of four centres passes them.
const assignBlock = 48

// assignAll returns the list of every row, on every core.
func (x *Index) assignAll(rows vector.Rows) []int32 {
	n, dim, nl := rows.Len(), rows.Dim, len(x.lists)
	out := make([]int32, n)
	workers := max(1, min(runtime.GOMAXPROCS(0), n/minParallelRows))
	_ = vector.SplitRows(n, workers, assignBlock, func(_, lo, hi int) error {
		fast := make([]float32, assignBlock*nl)
		qs := make([][]float32, 0, assignBlock)
		var (
			cand []candidate
			one  []int32
		)
		for b := lo; b < hi; b += assignBlock {
			end := min(b+assignBlock, hi)
			qs = qs[:0]
			for r := b; r < end; r++ {
				qs = append(qs, rows.Row(r))
			}
			x.f.ScoreRows(vector.DotProduct, qs, x.cent.Data, dim, fast)
			for i := range qs {
				one, cand = x.co.nearest(one[:0], fast[i*nl:(i+1)*nl], qs[i], 1, x.assignW(), cand)
				out[b+i] = one[0]
			}
		}
		return nil
	})
	return out
}

// assignW is the key weight rows are assigned by (see coarse): L2 for dot
// and l2, the dot product for cosine.
func (x *Index) assignW() float64 {
	if x.cent.Metric == vector.Cosine {
		return 0
	}
	return 1
}

// probeW is the key weight queries probe by: L2 for l2, the dot product
// for cosine and dot.
func (x *Index) probeW() float64 {
	if x.cent.Metric == vector.Euclidean {
		return 1
	}
	return 0
}

// AssignRows returns the list every row of rows belongs in, as Assign
// would, on every core. It reads only the centroids, never the lists or
// the write scratch, so it may run without the caller's lock, beside
// writes to the index: a shard building an index in the background
// assigns a copied chunk of its rows this way, with no lock held, then
// adds them under its lock with AppendAssigned.
func (x *Index) AssignRows(rows vector.Rows) []int32 {
	if rows.Dim != x.cent.Dim {
		panic(fmt.Sprintf("ivf: assign %d-D rows with %d-D centroids", rows.Dim, x.cent.Dim))
	}
	return x.assignAll(rows)
}

// AppendAssigned adds v as row Len() to list l, which must be Assign(v)
// (from AssignRows): the index trusts it, so a list given any other way
// would break the rule every replica assigns by.
func (x *Index) AppendAssigned(l int, v []float32) {
	if l < 0 || l >= len(x.lists) || len(v) != x.cent.Dim {
		panic(fmt.Sprintf("ivf: append %d floats to list %d of %d", len(v), l, len(x.lists)))
	}
	x.push(l, int32(len(x.where)), v)
}

// Assign returns the list v belongs in: a pure function of the centroids
// and v, ties to the lower list id. It uses the index's scratch space, as
// the writes do: call it under the write lock, not beside other writes.
func (x *Index) Assign(v []float32) int {
	if len(v) != x.cent.Dim {
		panic(fmt.Sprintf("ivf: assign %d floats with %d-D centroids", len(v), x.cent.Dim))
	}
	x.f.ScoreRows(vector.DotProduct, [][]float32{v}, x.cent.Data, x.cent.Dim, x.fast)
	x.one, x.cand = x.co.nearest(x.one[:0], x.fast, v, 1, x.assignW(), x.cand)
	return int(x.one[0])
}

// Centroids returns the centroids the index assigns by.
func (x *Index) Centroids() Centroids { return x.cent }

// Scale returns the int8 scale of its codes.
func (x *Index) Scale() quant.Scale { return x.scale }

// Len is the number of rows.
func (x *Index) Len() int { return len(x.where) }

// Lists is the number of lists.
func (x *Index) Lists() int { return len(x.lists) }

// ListLen is the number of rows in list l.
func (x *Index) ListLen(l int) int { return len(x.lists[l].rows) }

// ListRows returns the rows of list l, slot by slot; the slice aliases the
// index and is valid until its next write.
func (x *Index) ListRows(l int) []int32 { return x.lists[l].rows }

// Where returns the list of row i and its slot in the list.
func (x *Index) Where(i int) (list, pos int) {
	s := x.where[i]
	return int(s.list), int(s.pos)
}

// Bytes is the memory the index uses beside the shard's float32 rows:
// the codes (with their norms and sums), row numbers, the row → slot map
// and the centroids.
func (x *Index) Bytes() int {
	b := 8*cap(x.where) + 4*len(x.cent.Data) + 8*len(x.co.half)
	for _, l := range x.lists {
		b += l.codes.Bytes() + 4*cap(l.rows)
	}
	return b
}

// Append adds v as row Len(), to its nearest list, and returns the list.
func (x *Index) Append(v []float32) int {
	l := x.Assign(v)
	x.push(l, int32(len(x.where)), v)
	return l
}

// push appends row r (vector v) to list l and records where it went;
// x.where must have room for r or be r long.
func (x *Index) push(l int, r int32, v []float32) {
	li := &x.lists[l]
	s := slot{list: int32(l), pos: int32(len(li.rows))}
	li.rows = append(li.rows, r)
	li.codes.Append(v)
	if int(r) == len(x.where) {
		x.where = append(x.where, s)
	} else {
		x.where[r] = s
	}
}

// Set replaces row i's vector with v (an overwrite of an existing id),
// moving the row to v's list if that is another one, and returns the list.
func (x *Index) Set(i int, v []float32) int {
	x.check(i)
	l := x.Assign(v)
	s := x.where[i]
	if int(s.list) == l {
		x.lists[l].codes.Set(int(s.pos), v)
		return l
	}
	x.unlink(s)
	x.push(l, int32(i), v)
	return l
}

// Delete removes row i as the shard's arena does: the last row moves into
// row i (its number changes from Len()-1 to i; its list and codes do not).
func (x *Index) Delete(i int) {
	x.check(i)
	x.unlink(x.where[i])
	last := len(x.where) - 1
	if i != last {
		s := x.where[last]
		x.where[i] = s
		x.lists[s.list].rows[s.pos] = int32(i)
	}
	x.where = x.where[:last]
}

// unlink removes the row in slot s from its list by moving the list's
// last row into the slot, so the list stays dense.
func (x *Index) unlink(s slot) {
	li := &x.lists[s.list]
	last := len(li.rows) - 1
	li.codes.Delete(int(s.pos))
	if int(s.pos) != last {
		moved := li.rows[last]
		li.rows[s.pos] = moved
		x.where[moved].pos = s.pos
	}
	li.rows = li.rows[:last]
}

func (x *Index) check(i int) {
	if i < 0 || i >= len(x.where) {
		panic(fmt.Sprintf("ivf: row %d of %d", i, len(x.where)))
	}
}
