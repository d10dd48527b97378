package replica

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector/segment"
)

// docState is one id's document: absent, or its bytes.
type docState struct {
	present bool
	vec     []byte
	payload []byte
}

// crashSegRows is the crash children's segment size: small, so that
// segments seal and compact many times a round.
const crashSegRows = 32

// TestCrashDuringSealAndCompaction kills a shard process 24 times while
// writers append, overwrite and delete (so segment files seal, and
// segments less than half alive compact into new files) and a snapshot
// (syncing and hard-linking the files) is taken every 100 ms: kills land
// during seals, compactions and snapshots. After each restart (which
// links the last snapshot's files back and replays the log since) every
// id holds what its last acknowledged write left, or what the write in
// flight at the kill would have; and the segment and snapshot files stay
// bounded by the rows, whatever the kills left behind. It runs once with
// float32 rows alone and once with int8 codes, whose codes files (one
// beside each segment, written with its rows, linked by the snapshot and
// copied back at restart) must stay as bounded.
func TestCrashDuringSealAndCompaction(t *testing.T) {
	skipUnlessCrashTest(t, "kills a shard process 24 times")
	for _, quant := range []string{catalog.QuantNone, catalog.QuantInt8} {
		t.Run(quant, func(t *testing.T) { testCrashDuringSealAndCompaction(t, quant) })
	}
}

func testCrashDuringSealAndCompaction(t *testing.T, quant string) {
	proc := newCrashingShard(t)
	base, dir := proc.base, proc.dir

	const writers = 2
	var (
		mu sync.Mutex
		// acked is each id's state after its last acknowledged write;
		// maybe the state of a write sent but not acknowledged.
		acked = map[string]docState{}
		maybe = map[string]docState{}
		owned [writers][]string // ids each writer has written
	)
	rng := rand.New(rand.NewPCG(17, 19))
	const kills = 24
	next := 0
	for round := 0; round <= kills; round++ {
		cmd, c := proc.start(t, childFloat32Env+"="+catalog.Float32OnDisk, childSegRowsEnv+"="+strconv.Itoa(crashSegRows), childQuantEnv+"="+quant)

		st, err := c.Stats(ctx(t))
		require.NoError(t, err)
		mu.Lock()
		present := 0
		for id, want := range acked {
			got := docState{}
			v, err := c.Get(ctx(t), id, 0)
			if status.Code(err) != codes.NotFound {
				require.NoError(t, err)
				got = docState{present: true, vec: v.GetVector(), payload: v.GetPayload()}
			}
			alt, inFlight := maybe[id]
			if !(inFlight && got.equal(alt)) {
				require.True(t, got.equal(want), "round %d: %s holds %v, its last acknowledged write left %v", round, id, got.present, want.present)
			}
			// What the restarted shard holds is now what the id holds.
			acked[id] = got
			if got.present {
				present++
			}
		}
		clear(maybe)
		t.Logf("round %d: %d ids, %d present, %d stored, applied index %d", round, len(acked), present, st.GetDocCount(), st.GetAppliedIndex())
		require.Equal(t, present, int(st.GetDocCount()), "round %d: documents nobody wrote", round)
		// Files: the live segments are bounded by the rows (compaction),
		// the snapshots' links by what two snapshots hold, and nothing a
		// killed snapshot or compaction left behind piles up.
		// A codes file per segment at most.
		bound := 2*int(st.GetDocCount())/crashSegRows + 3
		// The shard snapshots meanwhile, and raft removes an old snapshot's
		// directory file by file in directory order: a listing taken then
		// can catch it with codes links whose row files are gone. What the
		// bounds are about stays; a moment's state passes on a later look.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			// One glob each, split after: the shard goes on writing and
			// snapshotting while they are listed.
			npys, err := filepath.Glob(filepath.Join(dir, SegmentDir, "*", "*.npy"))
			require.NoError(c, err)
			codesFiles := slices.DeleteFunc(slices.Clone(npys), func(p string) bool { return !strings.HasSuffix(p, segment.CodesExt) })
			segs := len(npys) - len(codesFiles)
			assert.LessOrEqual(c, segs, bound, "round %d: live segment files", round)
			assert.LessOrEqual(c, len(codesFiles), segs, "round %d: live codes files", round)
			if quant == catalog.QuantNone {
				assert.Empty(c, codesFiles, "round %d: codes files without int8", round)
			}
			links, err := filepath.Glob(filepath.Join(dir, "snapshots", "*", "files", "*"))
			require.NoError(c, err)
			assert.LessOrEqual(c, len(links), 2*2*(bound+8), "round %d: snapshot links", round)
			codesLinks := slices.DeleteFunc(slices.Clone(links), func(p string) bool { return !strings.HasSuffix(p, segment.CodesExt) })
			assert.LessOrEqual(c, len(codesLinks), len(links)-len(codesLinks), "round %d: snapshot links of codes files", round)
			tmps, err := filepath.Glob(filepath.Join(dir, "snapshots", "*.tmp"))
			require.NoError(c, err)
			// At most the one being written now: those a kill cut short are
			// removed at start.
			assert.LessOrEqual(c, len(tmps), 1, "round %d: unfinished snapshots", round)
		}, 10*time.Second, 100*time.Millisecond, "round %d: files", round)
		mu.Unlock()
		if round == kills {
			stopCrashingShard(t, cmd, c)
			break
		}

		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round*writers+w), 5))
				for {
					select {
					case <-stop:
						return
					default:
					}
					wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					err := crashWrite(wctx, c, r, &mu, acked, maybe, &owned[w], &next)
					cancel()
					if err != nil {
						var nl *shard.NotLeaderError
						if errors.As(err, &nl) {
							continue
						}
						return // killed: the write in flight stays a maybe
					}
				}
			})
		}
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		close(stop)
		wg.Wait()
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(acked), 500, "the test wrote too few documents to fill and compact segments")
	// The restarts linked their snapshot's files rather than stream rows.
	b, err := os.ReadFile(filepath.Join(base, childLog))
	require.NoError(t, err)
	// Each test's children log to their own file (base is the test's).
	linked := strings.Count(string(b), `msg="segments restored"`)
	withCodes := strings.Count(string(b), `codes_files=true`)
	t.Logf("%d of %d restarts restored linked segment files, %d with codes files", linked, kills, withCodes)
	require.GreaterOrEqual(t, linked, kills/2, "restarts restore the snapshot's segment files")
	if quant == catalog.QuantInt8 {
		require.GreaterOrEqual(t, withCodes, kills/2, "restarts restore the snapshot's codes files")
	} else {
		require.Zero(t, withCodes)
	}
}

func (d docState) equal(o docState) bool {
	if d.present != o.present {
		return false
	}
	return !d.present || (string(d.vec) == string(o.vec) && string(d.payload) == string(o.payload))
}

// crashWrite sends one write of a writer's: fresh ids (filling segments),
// an overwrite or a delete of one of its ids (leaving dead rows that
// compact). Until it is acknowledged its outcome is a maybe; an error
// leaves it so.
func crashWrite(ctx context.Context, c *client.Conn, r *rand.Rand, mu *sync.Mutex, acked, maybe map[string]docState, owned *[]string, next *int) error {
	doc := func() docState {
		v := make([]float32, testDim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		return docState{present: true, vec: shard.EncodeVector(v), payload: fmt.Appendf(nil, `{"n":%d}`, r.Uint64())}
	}
	mu.Lock()
	k := r.IntN(10)
	switch {
	case k < 5 || len(*owned) == 0:
		batch := make([]*shardpb.Vector, 1+r.IntN(8))
		states := make([]docState, len(batch))
		for i := range batch {
			id := fmt.Sprintf("doc-%d", *next)
			*next++
			*owned = append(*owned, id)
			acked[id] = docState{}
			states[i] = doc()
			maybe[id] = states[i]
			batch[i] = &shardpb.Vector{Id: id, Vector: states[i].vec, Payload: states[i].payload}
		}
		mu.Unlock()
		if _, err := c.Upsert(ctx, place, batch); err != nil {
			return err
		}
		mu.Lock()
		for i, v := range batch {
			acked[v.GetId()] = states[i]
			delete(maybe, v.GetId())
		}
	case k < 8:
		id := (*owned)[r.IntN(len(*owned))]
		s := doc()
		maybe[id] = s
		mu.Unlock()
		if _, err := c.Upsert(ctx, place, []*shardpb.Vector{{Id: id, Vector: s.vec, Payload: s.payload}}); err != nil {
			return err
		}
		mu.Lock()
		acked[id] = s
		delete(maybe, id)
	default:
		id := (*owned)[r.IntN(len(*owned))]
		maybe[id] = docState{}
		mu.Unlock()
		if _, _, err := c.Delete(ctx, place, id); err != nil {
			return err
		}
		mu.Lock()
		acked[id] = docState{}
		delete(maybe, id)
	}
	mu.Unlock()
	return nil
}
