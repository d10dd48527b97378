// Package memlimit runs a real `router shard` inside a cgroup v1 memory
// limit smaller than its float32 rows, behind a real `router serve`, and
// checks that an int8 collection whose float32 rows are on disk still
// loads and answers: exact queries equal a brute force, int8 queries carry
// exact scores, all within their deadline. It needs root and cgroup v1's
// memory controller (/sys/fs/cgroup/memory), so it runs under `make
// test-memlimit` (TRAWL_MEMLIMIT_TEST=1) and is skipped elsewhere.
package memlimit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

const (
	gateEnv   = "TRAWL_MEMLIMIT_TEST"
	cgroupV1  = "/sys/fs/cgroup/memory"
	dim       = 512
	rows      = 100_000
	batch     = 64
	limit     = 160 << 20 // bytes: below the 205 MB of float32 rows
	goMemLim  = "120MiB"  // the shard's GOMEMLIMIT, as the chart sets it
	queries   = 12
	k         = 10
	deadline  = 5 * time.Second // an exact scan reads every row from the page cache or the disk
	int8Limit = 1 * time.Second
)

func TestShardAnswersExactlyInsideAMemoryLimitBelowItsRows(t *testing.T) {
	if os.Getenv(gateEnv) == "" {
		t.Skip("needs root and cgroup v1 memory: run `make test-memlimit` (" + gateEnv + "=1)")
	}
	if _, err := os.Stat(filepath.Join(cgroupV1, "memory.limit_in_bytes")); err != nil {
		t.Skipf("cgroup v1 memory controller not mounted at %s (%v): cannot limit the shard's memory", cgroupV1, err)
	}
	float32On := "on_disk"
	if v := os.Getenv("TRAWL_MEMLIMIT_FLOAT32"); v != "" {
		float32On = v // in_memory shows what the limit does without the feature: the shard is OOM-killed
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "router")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/trawl-search/trawl/cmd/router").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	cg := filepath.Join(cgroupV1, fmt.Sprintf("trawl-memlimit-%d", os.Getpid()))
	require.NoError(t, os.Mkdir(cg, 0o755), "create a memory cgroup (needs root)")
	t.Cleanup(func() { _ = os.Remove(cg) })
	writeFile(t, filepath.Join(cg, "memory.limit_in_bytes"), strconv.Itoa(limit))
	// No swapping around the limit: anonymous memory past it is an OOM
	// kill, as in a container without swap.
	if _, err := os.Stat(filepath.Join(cg, "memory.memsw.limit_in_bytes")); err == nil {
		writeFile(t, filepath.Join(cg, "memory.memsw.limit_in_bytes"), strconv.Itoa(limit))
	}
	writeFile(t, filepath.Join(cg, "memory.swappiness"), "0")

	grpcAddr, shardHTTP, routerHTTP, qgrpc := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	// The shell joins the cgroup, then becomes the shard: every byte the
	// shard ever maps is charged to the cgroup.
	shardLog := filepath.Join(tmp, "shard.log")
	shardCmd := start(t, shardLog, "sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg,
		bin, "shard", "--grpc-addr", grpcAddr, "--http-addr", shardHTTP, "--data-dir", filepath.Join(tmp, "data"), "--dim", "8")
	shardCmd.Env = append(os.Environ(), "GOMEMLIMIT="+goMemLim)
	require.NoError(t, shardCmd.Start())
	shardDone := stopAtEnd(t, shardCmd)
	routerCmd := start(t, filepath.Join(tmp, "router.log"), bin, "serve", "--shard", "shard-0="+grpcAddr,
		"--http-addr", routerHTTP, "--qdrant-grpc-addr", qgrpc, "--max-deadline-ms", "10000", "--admission=false")
	require.NoError(t, routerCmd.Start())
	stopAtEnd(t, routerCmd)
	base := "http://" + routerHTTP
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(shardLog)
			t.Logf("shard log (tail):\n%s", tail(b, 4000))
			t.Logf("cgroup: usage max %s, failcnt %s, oom_control %s", readFile(cg, "memory.max_usage_in_bytes"),
				readFile(cg, "memory.failcnt"), readFile(cg, "memory.oom_control"))
		}
	}()
	require.Eventually(t, func() bool { return get(base+"/readyz") == http.StatusOK }, 60*time.Second, 100*time.Millisecond, "router ready")

	// An int8 collection; its float32 rows' placement is the subject.
	require.Eventually(t, func() bool {
		code, _ := call(t, http.MethodPut, base+"/v1/collections/big",
			fmt.Sprintf(`{"dimension": %d, "metric": "dot", "quantization": "int8", "float32": %q}`, dim, float32On))
		return code == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "collection created")

	rng := rand.New(rand.NewPCG(7, 7))
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = rng.Float32()*2 - 1
	}
	// The load stops at the first refusal: a shard killed by the limit
	// fails the test at once rather than after every write times out.
	g, gctx := errgroup.WithContext(context.Background())
	g.SetLimit(4)
	for lo := 0; lo < rows && gctx.Err() == nil; lo += batch {
		g.Go(func() error {
			if !alive(shardDone) {
				return fmt.Errorf("the shard exited (cgroup %s)", readFile(cg, "memory.oom_control"))
			}
			var b strings.Builder
			b.WriteString(`{"vectors": [`)
			for i := lo; i < min(lo+batch, rows); i++ {
				if i > lo {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"id": "d%d", "vector_b64": %q}`, i, b64(data[i*dim:(i+1)*dim]))
			}
			b.WriteString(`]}`)
			code, body := call(t, http.MethodPost, base+"/v1/collections/big/vectors", b.String())
			if code != http.StatusOK {
				return fmt.Errorf("upsert at %d: %d %s", lo, code, body)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait(), "load")
	require.True(t, alive(shardDone), "the shard is alive")
	oom := readFile(cg, "memory.oom_control")
	require.NotContains(t, oom, "oom_kill 1", "the shard was never OOM-killed")

	// Wait for the int8 scale: then queries without "exact" scan codes.
	require.Eventually(t, func() bool {
		code, body := call(t, http.MethodPost, base+"/v1/collections/big/search?deadline_ms=5000",
			fmt.Sprintf(`{"vector_b64": %q, "k": 1}`, b64(data[:dim])))
		return code == http.StatusOK && strings.Contains(body, `"exact":false`)
	}, 60*time.Second, 200*time.Millisecond, "int8 codes in use")

	for q := range queries {
		vec := make([]float32, dim)
		for i := range vec {
			vec[i] = rng.Float32()*2 - 1
		}
		want := bruteForce(data, vec)
		for _, exact := range []bool{true, false} {
			dl := int8Limit
			if exact {
				dl = deadline
			}
			began := time.Now()
			code, body := call(t, http.MethodPost, fmt.Sprintf("%s/v1/collections/big/search?deadline_ms=%d", base, dl.Milliseconds()),
				fmt.Sprintf(`{"vector_b64": %q, "k": %d, "exact": %t}`, b64(vec), k, exact))
			took := time.Since(began)
			require.Equal(t, http.StatusOK, code, "query %d exact=%t: %s", q, exact, body)
			var ans struct {
				Items []struct {
					ID    string  `json:"id"`
					Score float64 `json:"score"`
				} `json:"items"`
				SG struct {
					Degraded bool `json:"degraded"`
					Exact    bool `json:"exact"`
				} `json:"scatter_gather"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &ans))
			require.False(t, ans.SG.Degraded, "query %d exact=%t answered in full", q, exact)
			require.Equal(t, exact, ans.SG.Exact)
			require.Less(t, took, dl+time.Second, "query %d exact=%t within its deadline", q, exact)
			require.Len(t, ans.Items, k)
			for i, it := range ans.Items {
				row, err := strconv.Atoi(strings.TrimPrefix(it.ID, "d"))
				require.NoError(t, err)
				// Every score, int8 path or not, is the row's exact
				// float32 score: the re-score read the row on disk.
				s := dot(data[row*dim:(row+1)*dim], vec)
				require.InDelta(t, s, it.Score, 1e-3, "query %d exact=%t hit %d", q, exact, i)
				if exact {
					require.Equal(t, want[i], row, "query %d: exact top-%d equals brute force", q, k)
				}
			}
		}
	}
	anon, file := cgroupStat(t, cg)
	t.Logf("float32 rows %d MiB; cgroup limit %d MiB; cgroup now anon (rss) %d MiB, page cache %d MiB, max usage %s",
		rows*dim*4>>20, limit>>20, anon>>20, file>>20, readFile(cg, "memory.max_usage_in_bytes"))
	require.True(t, alive(shardDone), "the shard is alive")
}

func bruteForce(data, q []float32) []int {
	idx := make([]int, rows)
	sc := make([]float64, rows)
	for i := range idx {
		idx[i] = i
		sc[i] = dot(data[i*dim:(i+1)*dim], q)
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case sc[a] > sc[b]:
			return -1
		case sc[a] < sc[b]:
			return 1
		}
		return strings.Compare(fmt.Sprint("d", a), fmt.Sprint("d", b))
	})
	return idx[:k]
}

func dot(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func b64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func cgroupStat(t *testing.T, cg string) (anon, file int64) {
	t.Helper()
	for _, l := range strings.Split(readFile(cg, "memory.stat"), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "rss":
			anon = n
		case "cache":
			file = n
		}
	}
	return anon, file
}

func start(t *testing.T, logPath, name string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	return cmd
}

// stopAtEnd waits for a started process in the background and kills it
// when the test ends; the channel closes when it has exited.
func stopAtEnd(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return done
}

func alive(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func writeFile(t *testing.T, path, v string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(v), 0o644), "write %s", path)
}

func readFile(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return strings.TrimSpace(string(b))
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

func get(url string) int {
	res, err := httpClient.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode
}

func call(_ *testing.T, method, url, body string) (int, string) {
	req, err := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
