package replication

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// collModel is what the test wrote to one collection.
type collModel struct {
	name string
	dim  int
	docs map[string][]float32 // normalised (cosine)
}

// do sends one JSON request and returns the status and body.
func (r *routerProc) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

func unit(rng *rand.Rand, d int) []float32 {
	v := make([]float32, d)
	var n float64
	for i := range v {
		v[i] = float32(rng.NormFloat64())
		n += float64(v[i]) * float64(v[i])
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(n))
	}
	return v
}

// best is the k best cosine scores m holds for q.
func (m *collModel) best(q []float32, k int) []float64 {
	var s []float64
	for _, v := range m.docs {
		var x float64
		for i := range q {
			x += float64(q[i]) * float64(v[i])
		}
		s = append(s, x)
	}
	slices.Sort(s)
	slices.Reverse(s)
	return s[:min(k, len(s))]
}

// Collections are created, filled, searched and dropped while replicas
// are SIGKILLed and restarted, one at a time: a collection answers
// complete and exact, or 404/503 — never half-visible — and nothing of a
// dropped collection answers, before or after every replica restarts.
func TestChaosCollectionsAreNeverHalfVisible(t *testing.T) {
	gate(t)
	c := startCluster(t, 2)
	r := c.startRouter(t, "router", nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 31))
	run := chaosFor(t) / 3

	// The killer: one replica down at a time, so every group keeps a
	// majority and writes go on.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	kills := 0
	wg.Go(func() {
		krng := rand.New(rand.NewPCG(9, 1))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(300+krng.IntN(700)) * time.Millisecond):
			}
			rep := c.shards[krng.IntN(len(c.shards))][krng.IntN(3)]
			rep.Kill()
			kills++
			time.Sleep(time.Duration(200+krng.IntN(800)) * time.Millisecond)
			start(t, &rep.Proc)
		}
	})
	// Stopped in a cleanup too: a check failing mid-run must not leave
	// the killer restarting replicas (and failing) after the test ended,
	// which panics the whole test binary.
	stopKiller := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopKiller)

	var (
		live          []*collModel
		dropped       []string
		answers, gone int
		unavailable   int
		degraded      int
	)
	checkSearch := func(m *collModel, what string) {
		q := unit(rng, m.dim)
		code, raw, err := r.do(ctx, http.MethodPost, "/v1/collections/"+m.name+"/search?deadline_ms=2000", map[string]any{"vector": q, "k": 5})
		require.NoError(t, err)
		switch code {
		case http.StatusOK:
			var a answer
			require.NoError(t, json.Unmarshal(raw, &a))
			if a.ScatterGather.Degraded {
				degraded++
				return
			}
			answers++
			want := m.best(q, 5)
			require.Len(t, a.Items, len(want), "%s: %s answered a partial list unmarked: %s", what, m.name, raw)
			for i, h := range a.Items {
				require.InDelta(t, want[i], h.Score, 1e-4, "%s: %s hit %d", what, m.name, i)
			}
		case http.StatusServiceUnavailable:
			unavailable++
		default:
			t.Fatalf("%s: %s answered %d %s", what, m.name, code, raw)
		}
	}
	requireGone := func(name, what string) {
		code, raw, err := r.do(ctx, http.MethodPost, "/v1/collections/"+name+"/search?deadline_ms=2000", map[string]any{"vector": unit(rng, 4), "k": 5})
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, code, "%s: dropped %s answered %s", what, name, raw)
		gone++
	}

	deadline := time.Now().Add(run)
	for i := 0; time.Now().Before(deadline); i++ {
		switch {
		case len(live) < 3 || rng.IntN(3) == 0:
			m := &collModel{name: fmt.Sprintf("c-%d", i), dim: 4 + rng.IntN(8), docs: map[string][]float32{}}
			// A create during a kill may answer 503: it is completed by a
			// repeat, as a client would retry.
			require.Eventually(t, func() bool {
				code, _, err := r.do(ctx, http.MethodPut, "/v1/collections/"+m.name, map[string]any{"dimension": m.dim, "metric": "cosine"})
				return err == nil && code == http.StatusOK
			}, 30*time.Second, 100*time.Millisecond, "creating %s", m.name)
			var vs []map[string]any
			for j := range 30 {
				v := unit(rng, m.dim)
				id := fmt.Sprintf("d-%d", j)
				m.docs[id] = v
				vs = append(vs, map[string]any{"id": id, "vector": v})
			}
			require.Eventually(t, func() bool {
				code, _, err := r.do(ctx, http.MethodPost, "/v1/collections/"+m.name+"/vectors", map[string]any{"vectors": vs})
				return err == nil && code == http.StatusOK
			}, 30*time.Second, 100*time.Millisecond, "filling %s", m.name)
			live = append(live, m)
		case rng.IntN(4) == 0:
			j := rng.IntN(len(live))
			m := live[j]
			require.Eventually(t, func() bool {
				code, _, err := r.do(ctx, http.MethodDelete, "/v1/collections/"+m.name, nil)
				return err == nil && code == http.StatusOK
			}, 30*time.Second, 100*time.Millisecond, "dropping %s", m.name)
			live = slices.Delete(live, j, j+1)
			dropped = append(dropped, m.name)
			requireGone(m.name, "right after its drop")
		default:
			for _, m := range live {
				checkSearch(m, "during chaos")
			}
			for _, n := range dropped {
				requireGone(n, "during chaos")
			}
		}
	}
	stopKiller()
	t.Logf("chaos: %d kills, %d collections live, %d dropped; %d exact answers, %d degraded, %d unavailable, %d 404s of dropped ones",
		kills, len(live), len(dropped), answers, degraded, unavailable, gone)

	// Every replica restarts at once; nothing dropped comes back, every
	// live collection answers complete.
	for _, reps := range c.shards {
		for _, rep := range reps {
			rep.Kill()
		}
	}
	for _, reps := range c.shards {
		for _, rep := range reps {
			start(t, &rep.Proc)
		}
	}
	require.Eventually(t, func() bool {
		for _, reps := range c.shards {
			for _, rep := range reps {
				if !rep.Ready() {
					return false
				}
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "replicas never served after the restart")
	for _, n := range dropped {
		requireGone(n, "after the restart")
	}
	for _, m := range live {
		require.Eventually(t, func() bool {
			q := unit(rng, m.dim)
			var a answer
			code, err := r.post(ctx, "/v1/collections/"+m.name+"/search?deadline_ms=2000", map[string]any{"vector": q, "k": 5}, &a)
			if err != nil || code != http.StatusOK || a.ScatterGather.Degraded {
				return false
			}
			want := m.best(q, 5)
			if len(a.Items) != len(want) {
				return false
			}
			for i, h := range a.Items {
				if math.Abs(want[i]-float64(h.Score)) > 1e-4 {
					return false
				}
			}
			return true
		}, 30*time.Second, 100*time.Millisecond, "%s after the restart", m.name)
	}
	// And no replica holds a dropped collection.
	var st struct {
		Shards []struct {
			Name     string `json:"name"`
			Replicas []struct {
				Addr        string `json:"addr"`
				Collections []struct {
					Name string `json:"name"`
				} `json:"collections"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	code, raw, err := r.do(ctx, http.MethodGet, "/cluster/status", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(raw, &st))
	for _, sh := range st.Shards {
		for _, rep := range sh.Replicas {
			for _, coll := range rep.Collections {
				require.NotContains(t, dropped, coll.Name, "%s replica %s still holds a dropped collection", sh.Name, rep.Addr)
			}
		}
	}
}
