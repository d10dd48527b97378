package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/vector"
)

// holdStore is a backup store that holds a restore mid-way: the second
// open of file (the first is the restore's check of every file, the
// second its rows) reports on reached and waits for release, then opens
// it, or fails with what release sent. With failAfter set it does not
// wait: the file's reader fails after that many bytes.
type holdStore struct {
	backup.Dir
	file      string
	opens     atomic.Int32
	reached   chan struct{}
	release   chan error
	failAfter int64
}

func newHoldStore(dir backup.Dir, file string) *holdStore {
	return &holdStore{Dir: dir, file: file, reached: make(chan struct{}), release: make(chan error, 1)}
}

func (s *holdStore) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if name != s.file || s.opens.Add(1) != 2 {
		return s.Dir.Open(ctx, name)
	}
	if s.failAfter > 0 {
		rc, err := s.Dir.Open(ctx, name)
		if err != nil {
			return nil, err
		}
		return failingReader{io.LimitReader(rc, s.failAfter), rc}, nil
	}
	close(s.reached)
	if err := <-s.release; err != nil {
		return nil, err
	}
	return s.Dir.Open(ctx, name)
}

type failingReader struct {
	r io.Reader
	c io.Closer
}

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		err = errors.New("the disk failed")
	}
	return n, err
}

func (f failingReader) Close() error { return f.c.Close() }

// doH is httpAPI.do with the answer's headers.
func (a httpAPI) doH(method, p string, body any) (int, http.Header, []byte) {
	a.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(a.t, err)
	req, err := http.NewRequest(method, a.url+p, bytes.NewReader(b))
	require.NoError(a.t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return resp.StatusCode, resp.Header, raw
}

// A restore's target answers every client read and write 503 with
// Retry-After while the restore runs (its own writes go through), and
// shows as restoring, on the restoring router and on another one; a
// second restore into it is refused. Once done it serves exactly the
// backup's rows. A restore that fails midway leaves no collection. One
// whose router died stays restoring, never serving, through a restart
// of every shard and a new router, until it is deleted (then it can be
// restored again) or the restore is resumed with the same backup; a
// resume with a backup that does not match what it holds is refused.
func TestRestoreHidesTheTargetUntilDone(t *testing.T) {
	longtest.Mark(t)
	const dim, rows = 4, 600
	dcfg := devcluster.Config{Shards: 2, Replicas: 1, Dim: dim, Docs: 10, Kernel: vector.Generic(), DataDir: t.TempDir()}
	dc, err := devcluster.Start(dcfg)
	require.NoError(t, err)
	t.Cleanup(func() { dc.Close() })
	a, ra, stopA := routerOver(t, dc)
	set := catalog.Settings{Dim: dim, Metric: vector.Euclidean}.Normalize()
	code, raw := a.create("src", set)
	require.Equal(t, http.StatusOK, code, "%s", raw)
	m := &model{settings: set, docs: map[string][]float32{}}
	rng := rand.New(rand.NewPCG(38, 1))
	for i := 0; i < rows; i += 100 {
		var vs []map[string]any
		for j := i; j < i+100; j++ {
			id := fmt.Sprint("d", j)
			m.docs[id] = randomVector(rng, dim)
			vs = append(vs, map[string]any{"id": id, "vector": m.docs[id]})
		}
		code, raw := a.do(http.MethodPost, "/v1/collections/src/vectors", map[string]any{"vectors": vs})
		require.Equal(t, http.StatusOK, code, "%s", raw)
	}
	dir := backup.Dir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	man, err := ra.Coordinator.Backup(ctx, "src", "one", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)
	require.Len(t, man.Shards, 2)
	last := path.Join("src", "one", man.Shards[1].Vectors)

	// requireHidden: every client call on name is 503 with Retry-After,
	// and GET shows it restoring.
	requireHidden := func(a httpAPI, name string) {
		t.Helper()
		q := randomVector(rng, dim)
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodPost, "/v1/collections/" + name + "/search", map[string]any{"vector": q, "k": 5}},
			{http.MethodGet, "/v1/collections/" + name + "/vectors/d1", nil},
			{http.MethodPost, "/v1/collections/" + name + "/vectors", map[string]any{"vectors": []map[string]any{{"id": "intruder", "vector": q}}}},
			{http.MethodDelete, "/v1/collections/" + name + "/vectors/d2", nil},
			{http.MethodPost, "/collections/" + name + "/points/query", map[string]any{"query": q, "limit": 5}},
			{http.MethodPost, "/collections/" + name + "/points/count", map[string]any{"exact": true}},
			{http.MethodPut, "/collections/" + name + "/points?wait=true", map[string]any{"points": []map[string]any{{"id": 7, "vector": q}}}},
		} {
			code, h, raw := a.doH(c.method, c.path, c.body)
			require.Equal(t, http.StatusServiceUnavailable, code, "%s %s: %s", c.method, c.path, raw)
			require.NotEmpty(t, h.Get("Retry-After"), "%s %s", c.method, c.path)
		}
		code, raw := a.do(http.MethodGet, "/v1/collections/"+name, nil)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var st struct {
			State string `json:"state"`
		}
		require.NoError(t, json.Unmarshal(raw, &st))
		require.Equal(t, "restoring", st.State)
		code, raw = a.do(http.MethodGet, "/collections/"+name, nil)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var qi struct {
			Result struct {
				Status string `json:"status"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(raw, &qi))
		require.Equal(t, "grey", qi.Result.Status)
	}
	// requireServes: name holds exactly the backup's rows.
	// Another router than the restore's learns of its end on its next
	// catalog read (within minRefreshGap of a request): until then it
	// still answers 503, never part of the rows.
	requireServes := func(a httpAPI, name string) {
		t.Helper()
		var st struct {
			State    string `json:"state"`
			DocCount int    `json:"doc_count"`
		}
		require.Eventually(t, func() bool {
			code, raw := a.do(http.MethodGet, "/v1/collections/"+name, nil)
			require.Equal(t, http.StatusOK, code, "%s", raw)
			require.NoError(t, json.Unmarshal(raw, &st))
			return st.State == "ready"
		}, 5*time.Second, 50*time.Millisecond, "state %q", st.State)
		require.Equal(t, rows, st.DocCount, "the backup's rows, nothing a refused write sent")
		code, raw := a.do(http.MethodGet, "/v1/collections/"+name+"/vectors/intruder", nil)
		require.Equal(t, http.StatusNotFound, code, "%s", raw)
		for i := range 10 {
			q := randomVector(rng, dim)
			code, ans := a.search(name, q, 10)
			require.Equal(t, http.StatusOK, code)
			requireBruteForce(t, m, q, 10, ans.Items, fmt.Sprintf("%s query %d", name, i))
		}
	}

	// Held mid-way: the first shard's rows are in, the second's are not.
	hold := newHoldStore(dir, last)
	done := make(chan error, 1)
	var res coordinator.RestoreResult
	go func() {
		var err error
		res, err = ra.Coordinator.Restore(ctx, "src", "one", "copy", coordinator.BackupConfig{Store: hold})
		done <- err
	}()
	<-hold.reached
	b, rb, stopB := routerOver(t, dc) // another router: the flag is in the catalog
	requireHidden(a, "copy")
	requireHidden(b, "copy")
	_, err = rb.Coordinator.Restore(ctx, "src", "one", "copy", coordinator.BackupConfig{Store: dir})
	require.Equal(t, coordinator.CodeConflict, coordinator.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "delete it first")
	hold.release <- nil
	require.NoError(t, <-done)
	require.EqualValues(t, rows, res.Rows)
	requireServes(a, "copy")
	requireServes(b, "copy")

	// A read that fails after the first shard's rows were written.
	fail := newHoldStore(dir, last)
	fail.failAfter = 100
	var wrote atomic.Int64
	_, err = ra.Coordinator.Restore(ctx, "src", "one", "broken", coordinator.BackupConfig{Store: fail,
		Progress: func(done, _ int64) { wrote.Store(done) }})
	require.Error(t, err)
	require.Positive(t, wrote.Load(), "rows were written before the failure")
	for _, r := range []httpAPI{a, b} {
		code, raw := r.do(http.MethodGet, "/v1/collections/broken", nil)
		require.Equal(t, http.StatusNotFound, code, "%s", raw)
	}

	// A router that dies mid-restore cannot delete what it created.
	c, rc, stopC := routerOver(t, dc)
	_ = c
	dead := newHoldStore(dir, last)
	go func() {
		_, err := rc.Coordinator.Restore(ctx, "src", "one", "dead", coordinator.BackupConfig{Store: dead})
		done <- err
	}()
	<-dead.reached
	stopC()
	dead.release <- errors.New("the router died")
	require.Error(t, <-done)
	requireHidden(a, "dead")
	// And another, to resume.
	_, rd, stopD := routerOver(t, dc)
	dead2 := newHoldStore(dir, last)
	go func() {
		_, err := rd.Coordinator.Restore(ctx, "src", "one", "dead2", coordinator.BackupConfig{Store: dead2})
		done <- err
	}()
	<-dead2.reached
	stopD()
	dead2.release <- errors.New("the router died")
	require.Error(t, <-done)
	requireHidden(a, "dead2")
	// A backup of another collection, with the same settings and other
	// rows, and one with other settings.
	code, raw = a.create("few", set)
	require.Equal(t, http.StatusOK, code, "%s", raw)
	code, raw = a.do(http.MethodPost, "/v1/collections/few/vectors", map[string]any{"vectors": []map[string]any{{"id": "x0", "vector": randomVector(rng, dim)}}})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	_, err = ra.Coordinator.Backup(ctx, "few", "two", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)
	code, raw = a.create("dotty", catalog.Settings{Dim: dim, Metric: vector.DotProduct}.Normalize())
	require.Equal(t, http.StatusOK, code, "%s", raw)
	_, err = ra.Coordinator.Backup(ctx, "dotty", "three", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)

	// Every shard restarts from its data directory; a new router.
	stopA()
	stopB()
	dc.Close()
	dc, err = devcluster.Start(dcfg)
	require.NoError(t, err)
	require.True(t, dc.Loaded)
	a, ra, _ = routerOver(t, dc)
	requireHidden(a, "dead")
	requireServes(a, "copy")
	_, err = ra.Coordinator.Restore(ctx, "src", "one", "dead", coordinator.BackupConfig{Store: dir})
	require.Equal(t, coordinator.CodeConflict, coordinator.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "resume it")

	// Resumed with the backup it was restoring: every row is written
	// again, and it serves exactly the backup's rows.
	res, err = ra.Coordinator.Restore(ctx, "src", "one", "dead2", coordinator.BackupConfig{Store: dir, Resume: true})
	require.NoError(t, err)
	require.EqualValues(t, rows, res.Rows)
	requireServes(a, "dead2")
	// Resumed with a backup of other settings: refused, nothing written.
	_, err = ra.Coordinator.Restore(ctx, "dotty", "three", "dead", coordinator.BackupConfig{Store: dir, Resume: true})
	require.Equal(t, coordinator.CodeConflict, coordinator.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "other settings")
	// Resumed with another backup of the same settings: the target holds
	// rows that backup lacks, so it stays restoring, to be deleted.
	_, err = ra.Coordinator.Restore(ctx, "few", "two", "dead", coordinator.BackupConfig{Store: dir, Resume: true})
	require.Equal(t, coordinator.CodeConflict, coordinator.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "another backup")
	requireHidden(a, "dead")
	code, raw = a.do(http.MethodDelete, "/v1/collections/dead", nil)
	require.Equal(t, http.StatusOK, code, "%s", raw)
	res, err = ra.Coordinator.Restore(ctx, "src", "one", "dead", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)
	require.EqualValues(t, rows, res.Rows)
	requireServes(a, "dead")
}
