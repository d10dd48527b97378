package ivf

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// lists returns the index's lists as row-id sets in slot order.
func listsOf(x *Index, ids []string) [][]string {
	out := make([][]string, x.Lists())
	for l := range out {
		out[l] = []string{}
		for _, r := range x.ListRows(l) {
			out[l] = append(out[l], ids[r])
		}
	}
	return out
}

// checkIndex asserts the index's invariants against the rows it mirrors:
// row ↔ slot maps agree, each row is in the list its vector is assigned
// to, and each slot's codes and norm are its row's encoding.
func checkIndex(t *testing.T, x *Index, rows vector.Rows) {
	t.Helper()
	require.Equal(t, rows.Len(), x.Len())
	seen := 0
	want := make([]int8, rows.Dim)
	for l := range x.Lists() {
		li := x.lists[l]
		require.Equal(t, len(li.rows), li.codes.Len(), "list %d", l)
		for pos, r := range li.rows {
			gl, gp := x.Where(int(r))
			require.Equal(t, []int{l, pos}, []int{gl, gp}, "row %d", r)
			x.scale.Encode(want, rows.Row(int(r)))
			require.Equal(t, want, li.codes.Row(pos), "codes of row %d", r)
			seen++
		}
	}
	require.Equal(t, rows.Len(), seen)
	for i := range rows.Len() {
		l, _ := x.Where(i)
		require.Equal(t, x.Assign(rows.Row(i)), l, "row %d", i)
	}
}

// TestBuildIsDeterministic: Build gives the same lists, slot for slot, as
// appending the rows one by one, on every kernel and any core count.
func TestBuildIsDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, m := range metrics {
		rows, _ := clustered(r, 3000, 0, 48, m == vector.Cosine)
		b := build(t, m, rows, 20)
		checkIndex(t, b.x, rows)
		want := listsOf(b.x, rows.IDs)
		for _, f := range vector.Available() {
			x, err := Build(f, b.x.Centroids(), b.x.Scale(), rows)
			require.NoError(t, err)
			require.Equal(t, want, listsOf(x, rows.IDs), "%v Build with %s", m, f.Name)
			y, err := New(f, b.x.Centroids(), b.x.Scale())
			require.NoError(t, err)
			for i := range rows.Len() {
				y.Append(rows.Row(i))
			}
			require.Equal(t, want, listsOf(y, rows.IDs), "%v Append with %s", m, f.Name)
		}
		// AssignRows on chunks, then AppendAssigned: the shard's
		// background build.
		z, err := New(b.f, b.x.Centroids(), b.x.Scale())
		require.NoError(t, err)
		for lo := 0; lo < rows.Len(); lo += 700 {
			hi := min(lo+700, rows.Len())
			chunk := vector.FlatRows(flat(rows)[lo*rows.Dim:hi*rows.Dim], rows.Dim, rows.IDs[lo:hi])
			for i, l := range z.AssignRows(chunk) {
				z.AppendAssigned(int(l), chunk.Row(i))
			}
		}
		require.Equal(t, want, listsOf(z, rows.IDs), "%v AssignRows + AppendAssigned", m)
		// Built again from its recorded lists (a snapshot's), no row
		// assigned: the same index.
		a, err := BuildAssigned(b.f, b.x.Centroids(), b.x.Scale(), rows, b.x.Assignment())
		require.NoError(t, err)
		require.Equal(t, want, listsOf(a, rows.IDs), "%v BuildAssigned", m)
		checkIndex(t, a, rows)
		bad := b.x.Assignment()
		bad[7] = int32(b.x.Lists())
		_, err = BuildAssigned(b.f, b.x.Centroids(), b.x.Scale(), rows, bad)
		require.Error(t, err, "a list out of range")
		_, err = BuildAssigned(b.f, b.x.Centroids(), b.x.Scale(), rows, bad[:5])
		require.Error(t, err, "lists for other rows")
		// Round trip through the log's form.
		bin, err := b.x.Centroids().MarshalBinary()
		require.NoError(t, err)
		var c Centroids
		require.NoError(t, c.UnmarshalBinary(bin))
		x, err := Build(b.f, c, b.x.Scale(), rows)
		require.NoError(t, err)
		require.Equal(t, want, listsOf(x, rows.IDs))
	}
}

// arena is a minimal stand-in for the shard's store: rows in one slice,
// deletes moving the last row into the hole.
type arena struct {
	dim  int
	data []float32
	ids  []string
}

func (a *arena) rows() vector.Rows { return vector.FlatRows(a.data, a.dim, a.ids) }

func (a *arena) delete(i int) {
	last := len(a.ids) - 1
	copy(a.data[i*a.dim:(i+1)*a.dim], a.data[last*a.dim:])
	a.ids[i] = a.ids[last]
	a.data, a.ids = a.data[:last*a.dim], a.ids[:last]
}

// TestWritesKeepListsConsistent: appends, overwrites (moving rows between
// lists) and deletes, mirrored on an arena as the shard does them, keep
// every invariant; the lists hold the same rows as Build from the final
// rows (slot order may differ), and searches answer the same.
func TestWritesKeepListsConsistent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, m := range metrics {
		rows, vecs := clustered(r, 2000, 600, 32, m == vector.Cosine)
		b := build(t, m, rows, 16)
		a := &arena{dim: 32, data: slices.Clone(flat(rows)), ids: slices.Clone(rows.IDs)}
		x := b.x
		next := 0
		for step := range 1500 {
			switch op := r.IntN(3); {
			case op == 0 || len(a.ids) < 10:
				v := vecs[next%len(vecs)]
				next++
				a.data = append(a.data, v...)
				a.ids = append(a.ids, "new-"+string(rune('a'+step%26))+string(rune('a'+step/26%26))+string(rune('a'+step/676)))
				x.Append(v)
			case op == 1:
				i := r.IntN(len(a.ids))
				v := vecs[r.IntN(len(vecs))]
				copy(a.data[i*32:(i+1)*32], v)
				x.Set(i, v)
			default:
				i := r.IntN(len(a.ids))
				a.delete(i)
				x.Delete(i)
			}
			if step%250 == 0 {
				checkIndex(t, x, a.rows())
			}
		}
		checkIndex(t, x, a.rows())
		fresh, err := Build(b.f, x.Centroids(), x.Scale(), a.rows())
		require.NoError(t, err)
		got, want := listsOf(x, a.ids), listsOf(fresh, a.ids)
		for l := range got {
			require.ElementsMatch(t, want[l], got[l], "%v list %d", m, l)
		}
		qs := queriesOf(vecs[:20], 10, 3)
		h1, err := x.Search(context.Background(), b.k, b.f, a.rows(), qs)
		require.NoError(t, err)
		h2, err := fresh.Search(context.Background(), b.k, b.f, a.rows(), qs)
		require.NoError(t, err)
		require.Equal(t, h2, h1, "%v", m)
	}
}

func TestIndexErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rows := gaussian(r, 100, 8, true)
	s, err := quant.Train(flat(rows), 8, quant.DefaultKind)
	require.NoError(t, err)
	c := Centroids{Metric: vector.Cosine, Dim: 8, Data: slices.Clone(flat(rows)[:8*4])}
	f := vector.Generic()
	_, err = New(f, Centroids{Metric: vector.Cosine, Dim: 4, Data: flat(rows)[:16]}, s)
	require.Error(t, err, "dimension mismatch with the scale")
	_, err = New(f, Centroids{Metric: 7, Dim: 8, Data: flat(rows)[:16]}, s)
	require.Error(t, err, "metric")
	_, err = Build(f, c, s, vector.FlatRows(flat(rows)[:80], 8, rows.IDs))
	require.Error(t, err, "short rows")
	x, err := New(f, c, s)
	require.NoError(t, err)
	require.Panics(t, func() { x.Delete(0) })
	require.Panics(t, func() { x.Set(0, rows.Row(0)) })
	require.Panics(t, func() { x.Assign(rows.Row(0)[:4]) })
	k, _ := quant.Select("")
	_, err = x.Search(context.Background(), k, f, rows, nil)
	require.Error(t, err, "the index does not mirror rows")
	x.Append(rows.Row(0))
	one := vector.FlatRows(flat(rows)[:8], 8, rows.IDs[:1])
	for name, q := range map[string]Query{
		"dim":        {Query: vector.Query{Vector: rows.Row(1)[:4], K: 1}},
		"k":          {Query: vector.Query{Vector: rows.Row(1), K: -1}},
		"nprobe":     {Query: vector.Query{Vector: rows.Row(1), K: 1}, NProbe: -1},
		"oversample": {Query: vector.Query{Vector: rows.Row(1), K: 1}, Oversample: quant.MaxOversample + 1},
	} {
		_, err := x.Search(context.Background(), k, f, one, []Query{q})
		require.Error(t, err, name)
	}
	require.Greater(t, x.Bytes(), 8)
}
