package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard/internal/shardtest"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
	"github.com/trawl-search/trawl/vector/segment"
)

// int8Store returns an empty int8 store of dim-D rows with scale applied,
// its float32 rows in memory or in small segment files.
func int8Store(t *testing.T, dim int, disk bool, scale []byte) *Memory {
	t.Helper()
	opts := []MemoryOption{WithQuantization(QuantInt8)}
	if disk {
		set, err := segment.OpenRows(t.TempDir(), dim, 64)
		require.NoError(t, err)
		opts = append(opts, WithSegments(set))
	}
	m := NewMemory(dim, opts...)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.SetTrained(TrainedInt8Scale, scale, true))
	return m
}

// requireHolds checks that m holds exactly want's rows: each id's vector
// and its int8 codes and norm (as encoding it afresh gives them), and that
// an exact scan of its rows answers as brute force over want does.
func requireHolds(t *testing.T, m *Memory, want map[string][]float32, scale quant.Scale) {
	t.Helper()
	require.Equal(t, len(want), m.Len())
	dst := make([]int8, scale.Dim())
	for id, v := range want {
		got, ok := m.Get(id)
		require.True(t, ok, id)
		require.Equal(t, v, got, id)
	}
	k, err := vector.Select("")
	require.NoError(t, err)
	q := want[slices.Sorted(maps.Keys(want))[0]]
	require.NoError(t, m.ViewScan(func(v *ScanView) error {
		require.NotNil(t, v.Codes)
		for i, id := range v.Rows.IDs {
			e := quant.EncodeRow(scale, dst, want[id])
			require.Equal(t, e.Codes, v.Codes.Row(i), "codes of %s", id)
			require.Equal(t, e.Norm, v.Codes.Norm(i), "norm of %s", id)
		}
		hits, err := k.Scan(context.Background(), vector.DotProduct, v.Rows, []vector.Query{{Vector: q, K: 10}})
		require.NoError(t, err)
		require.Equal(t, bruteTop(want, q, 10), idsOf(hits[0]))
		return nil
	}))
}

// testScale is a committed int8 scale of dim-D rows, encoded and
// decoded.
func testScale(t *testing.T, dim int) ([]byte, quant.Scale) {
	t.Helper()
	b := benchScale(t, dim)
	var s quant.Scale
	require.NoError(t, s.UnmarshalBinary(b))
	return b, s
}

// bruteTop is the ids of the k rows of want with the highest dot product
// with q, computed in float64, ties by id.
func bruteTop(want map[string][]float32, q []float32, k int) []string {
	type scored struct {
		id string
		s  float64
	}
	var all []scored
	for id, v := range want {
		var s float64
		for d := range v {
			s += float64(v[d]) * float64(q[d])
		}
		all = append(all, scored{id, s})
	}
	slices.SortFunc(all, func(a, b scored) int {
		if a.s != b.s {
			if a.s > b.s {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.id, b.id)
	})
	var ids []string
	for _, s := range all[:min(k, len(all))] {
		ids = append(ids, s.id)
	}
	return ids
}

func idsOf(hits []vector.Hit) []string {
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID)
	}
	return ids
}

// TestPreparedWritesMatch: writes prepared before the write lock (room
// allocated, the first chunk grown and copied, pages faulted in) leave an
// int8 store, rows in memory or on disk, holding exactly what the same
// writes leave without preparation, through interleaved appends,
// overwrites and deletes while the arenas grow through their doublings:
// the same rows in the same order, the codes of each row's vector, and
// exact scans that answer as brute force.
func TestPreparedWritesMatch(t *testing.T) {
	const dim = 16
	bg := context.Background()
	scaleBytes, scale := testScale(t, dim)
	for _, disk := range []bool{false, true} {
		t.Run(fmt.Sprint("on_disk=", disk), func(t *testing.T) {
			prepared, plain := int8Store(t, dim, disk, scaleBytes), int8Store(t, dim, disk, scaleBytes)
			plain.noPrepare = true
			both := func(fn func(m *Memory)) { fn(prepared); fn(plain) }
			want := map[string][]float32{}
			rng := rand.New(rand.NewPCG(3, 4))
			for step := range 150 {
				var recs []Record
				for range 1 + rng.IntN(64) {
					id := fmt.Sprint(rng.IntN(4000))
					v := shardtest.Normal(rng, dim)
					recs = append(recs, Record{ID: id, Vector: v})
					want[id] = v
				}
				both(func(m *Memory) { require.NoError(t, m.Upsert(bg, place, recs)) })
				for range rng.IntN(8) {
					id := fmt.Sprint(rng.IntN(4000))
					delete(want, id)
					both(func(m *Memory) { _, err := m.Delete(bg, place, id); require.NoError(t, err) })
				}
				if step%50 == 49 {
					requireHolds(t, prepared, want, scale)
				}
			}
			require.Greater(t, len(want), 1024, "the arenas grew through several doublings")
			require.Positive(t, prepared.adopted, "the room prepared before the lock was installed")
			require.Zero(t, plain.adopted)
			requireHolds(t, prepared, want, scale)
			requireHolds(t, plain, want, scale)
			require.NoError(t, prepared.ViewScan(func(a *ScanView) error {
				return plain.ViewScan(func(b *ScanView) error {
					require.Equal(t, a.Rows.IDs, b.Rows.IDs)
					require.Equal(t, a.Rows.Clone(), b.Rows.Clone())
					return nil
				})
			}))
		})
	}
}

// TestStalePreparationDiscarded: when the store changes between a
// write's preparation and its write lock while keeping its row count and
// chunks (an overwrite in place; a delete that moves the last row into
// the hole, then an append), and the prepared write grows the first
// chunk from a copy of the rows as they were, the write does not install
// what it prepared and the store holds exactly the rows it should.
func TestStalePreparationDiscarded(t *testing.T) {
	const dim = 16
	bg := context.Background()
	scaleBytes, scale := testScale(t, dim)
	for _, disk := range []bool{false, true} {
		for _, between := range []string{"overwrite", "delete and append"} {
			t.Run(fmt.Sprintf("on_disk=%t/%s", disk, between), func(t *testing.T) {
				m := int8Store(t, dim, disk, scaleBytes)
				rng := rand.New(rand.NewPCG(5, 6))
				want := map[string][]float32{}
				batch := func(n, from int) []Record {
					var recs []Record
					for i := range n {
						v := shardtest.Normal(rng, dim)
						id := fmt.Sprint("doc-", from+i)
						recs = append(recs, Record{ID: id, Vector: v})
						want[id] = v
					}
					return recs
				}
				// 64 rows fill the first chunk exactly: the next write
				// grows it.
				require.NoError(t, m.Upsert(bg, place, batch(64, 0)))
				locks := m.locks
				m.preparedHook = func() {
					m.preparedHook = nil
					switch between {
					case "overwrite":
						require.NoError(t, m.Upsert(bg, place, batch(1, 5)))
					default:
						delete(want, "doc-0")
						_, err := m.Delete(bg, place, "doc-0")
						require.NoError(t, err)
						require.NoError(t, m.Upsert(bg, place, batch(1, 1000)))
					}
				}
				require.NoError(t, m.Upsert(bg, place, batch(10, 64)))
				require.GreaterOrEqual(t, m.locks, locks+2, "the store changed between")
				requireHolds(t, m, want, scale)
			})
		}
	}
}

// TestPreparedWritesBesideScansAndViews: prepared writes run beside
// scans reading the rows and codes, beside deletes from another goroutine
// (so preparations go stale), and while a snapshot view opened midway is
// read: under -race nothing races, every scan sees as many codes as rows,
// the view reads exactly the rows it was opened at, and the store ends
// holding exactly what was written.
func TestPreparedWritesBesideScansAndViews(t *testing.T) {
	const dim = 16
	bg := context.Background()
	scaleBytes, scale := testScale(t, dim)
	for _, disk := range []bool{false, true} {
		t.Run(fmt.Sprint("on_disk=", disk), func(t *testing.T) {
			m := int8Store(t, dim, disk, scaleBytes)
			m.politeFor = 0 // scans never pause here: queue for the lock at once
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						assert.NoError(t, m.ViewScan(func(v *ScanView) error {
							assert.Equal(t, v.Rows.Len(), v.Codes.Len())
							var sum float32
							for i := range v.Rows.Len() {
								sum += v.Rows.Row(i)[0] + float32(v.Codes.Row(i)[0])
							}
							_ = sum
							return nil
						}))
					}
				})
			}
			// Deletes from another goroutine than the writes' take the
			// write lock between preparations and their writes.
			var mu sync.Mutex
			want := map[string][]float32{}
			deletes := make(chan string, 64)
			wg.Go(func() {
				for id := range deletes {
					mu.Lock()
					_, err := m.Delete(bg, place, id)
					delete(want, id)
					mu.Unlock()
					assert.NoError(t, err)
				}
			})
			rng := rand.New(rand.NewPCG(9, 10))
			var view *View
			var atView map[string][]float32
			for step := range 120 {
				var recs []Record
				for range 1 + rng.IntN(48) {
					v := shardtest.Normal(rng, dim)
					recs = append(recs, Record{ID: fmt.Sprint(rng.IntN(3000)), Vector: v})
				}
				mu.Lock()
				require.NoError(t, m.Upsert(bg, place, recs))
				for _, r := range recs {
					want[r.ID] = r.Vector
				}
				mu.Unlock()
				if rng.IntN(2) == 0 {
					deletes <- fmt.Sprint(rng.IntN(3000))
				}
				if step == 40 {
					mu.Lock()
					var err error
					view, err = m.OpenView()
					require.NoError(t, err)
					atView = maps.Clone(want)
					mu.Unlock()
				}
			}
			close(deletes)
			close(stop)
			wg.Wait()
			got := map[string][]float32{}
			require.NoError(t, view.Read(0, view.Len(), func(id string, vec []float32, _ []byte) error {
				got[id] = slices.Clone(vec)
				return nil
			}))
			view.Close()
			require.Equal(t, atView, got, "the view reads the rows it was opened at")
			requireHolds(t, m, want, scale)
		})
	}
}

// TestPreparationRunsInBackground: with WithBackground, a write's whole
// preparation (room for its rows, page faults, int8 encoding) goes
// through the background runner, once a write, float32 stores included,
// while the write lock is free (a runner of lower priority must never
// keep scans waiting), and the store ends up holding exactly what was
// written.
func TestPreparationRunsInBackground(t *testing.T) {
	for _, tc := range []struct {
		name       string
		int8, disk bool
	}{
		{"float32 in memory", false, false},
		{"int8 in memory", true, false},
		{"int8 on disk", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const dim = 32
			scaleBytes, scale := testScale(t, dim)
			var (
				m     *Memory
				calls int
			)
			run := func(f func()) {
				calls++
				require.True(t, m.mu.TryRLock(), "background work must not run under the write lock")
				m.mu.RUnlock()
				f()
			}
			opts := []MemoryOption{WithBackground(run)}
			if tc.int8 {
				opts = append(opts, WithQuantization(QuantInt8))
			}
			if tc.disk {
				set, err := segment.OpenRows(t.TempDir(), dim, 64)
				require.NoError(t, err)
				opts = append(opts, WithSegments(set))
			}
			m = NewMemory(dim, opts...)
			t.Cleanup(func() { require.NoError(t, m.Close()) })
			if tc.int8 {
				require.NoError(t, m.SetTrained(TrainedInt8Scale, scaleBytes, true))
			}
			calls = 0

			rng := rand.New(rand.NewPCG(7, 9))
			want := map[string][]float32{}
			for batch := range 3 {
				recs := make([]Record, 50)
				for i := range recs {
					id := fmt.Sprintf("r%d", (batch*37+i)%120) // later batches overwrite some
					recs[i] = Record{ID: id, Vector: shardtest.Normal(rng, dim)}
					want[id] = recs[i].Vector
				}
				require.NoError(t, m.Upsert(context.Background(), place, recs))
			}
			require.Equal(t, 3, calls, "one background preparation a write")
			// Under Foreground the write prepares on the caller's goroutine.
			extra := Record{ID: "fg", Vector: shardtest.Normal(rng, dim)}
			require.NoError(t, m.Upsert(Foreground(context.Background()), place, []Record{extra}))
			want[extra.ID] = extra.Vector
			require.Equal(t, 3, calls, "a Foreground write uses no background")
			if tc.int8 {
				requireHolds(t, m, want, scale)
				return
			}
			require.Equal(t, len(want), m.Len())
			for id, v := range want {
				got, ok := m.Get(id)
				require.True(t, ok, id)
				require.Equal(t, v, got, id)
			}
		})
	}
}
