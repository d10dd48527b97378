package replica

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// TestWritesAreSyncedBeforeTheAck runs a shard process under strace -tt and
// sends it acknowledged upserts one at a time: by the time of each ack, at
// least one more fdatasync/fsync of the raft log (raft.db) had begun.
// SIGKILL keeps the page cache, so the crash test alone cannot see a
// missing sync; this can. Skips where strace or ptrace is unavailable.
func TestWritesAreSyncedBeforeTheAck(t *testing.T) {
	longtest.Mark(t) // traces a shard process
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace not installed")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "data")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	trace := filepath.Join(t.TempDir(), "trace")
	// -y names each descriptor's file; -tt timestamps order syncs against
	// acks.
	cmd := exec.Command(strace, "-f", "-y", "-tt", "-e", "trace=fsync,fdatasync", "-o", trace, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childDirEnv+"="+dir, childAddrEnv+"="+addr)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		// A failed assertion must not leave the traced shard writing into
		// the test's directory: stop it (strace exits with it).
		if b, err := os.ReadFile(filepath.Join(dir, "..", "child.pid")); err == nil {
			if pid, err := strconv.Atoi(string(b)); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c, err := client.Dial(addr, client.DialConfig{})
	require.NoError(t, err)
	defer c.Close()
	ok := false
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(50 * time.Millisecond) {
		pctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		err := c.Probe(pctx)
		cancel()
		if err == nil {
			ok = true
			break
		}
	}
	if !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Skip("the traced shard never served (ptrace refused?)")
	}
	// stamp is strace -tt's clock format; the child shares this host's
	// clock and time zone, and the strings order as the times do.
	stamp := func() string { return time.Now().Format("15:04:05.000000") }
	// Let start-up syncs settle, then look only at the writes' own.
	time.Sleep(500 * time.Millisecond)
	from := stamp()
	const writes = 40
	acks := make([]string, writes)
	for i := range writes {
		_, err := c.Upsert(ctx(t), place, []*shardpb.Vector{{Id: strings.Repeat("x", i+1), Vector: shard.EncodeVector(testVec("s", i))}})
		require.NoError(t, err)
		acks[i] = stamp()
	}
	time.Sleep(200 * time.Millisecond) // strace's file catches up
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	var synced []string // when each sync of raft.db began
	// A sync strace saw begin: "= 0" on its line, or "<unfinished ...>"
	// when another thread's syscall came between its start and its end
	// (common on a loaded machine; its "resumed" line names no file).
	for _, m := range regexp.MustCompile(`(\d\d:\d\d:\d\d\.\d{6}) f(?:data)?sync\(\d+<[^>]*raft\.db>(?:\) = 0| <unfinished \.\.\.>)`).FindAllSubmatch(b, -1) {
		if ts := string(m[1]); ts > from {
			synced = append(synced, ts)
		}
	}
	// The i-th acknowledgement came after at least i+1 syncs of the log:
	// no write was answered before its own sync.
	for i, ack := range acks {
		n := 0
		for _, ts := range synced {
			if ts <= ack {
				n++
			}
		}
		require.GreaterOrEqual(t, n, i+1, "write %d was acknowledged at %s after only %d syncs of raft.db", i, ack, n)
	}
	syncs := len(synced)
	// Stop the traced shard itself; strace exits with it.
	b, err = os.ReadFile(filepath.Join(dir, "..", "child.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(string(b))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	_ = cmd.Wait()
	t.Logf("MEASURED: %d sequential acknowledged upserts cost %d syncs of raft.db", writes, syncs)
	require.GreaterOrEqual(t, syncs, writes, "an acknowledged write was not synced to the raft log")
}
