package app_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// testHost is a network namespace joined to this one by a veth pair: a
// second host on this machine whose cable the test can pull.
type testHost struct {
	ns, hostIf, nsIf string
	hostIP, nsIP     string
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %v: %v: %s", args, err, out)
	}
	return nil
}

// newTestHost makes the namespace, or skips the test where the machine
// does not allow it (not root, no iproute2, no namespaces).
func newTestHost(t *testing.T) *testHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 (ip) is not installed")
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	// A /30 in the namespace's own link: traffic never leaves the veth pair.
	h := &testHost{ns: "trawl-" + id, hostIf: "tw" + id + "a", nsIf: "tw" + id + "b",
		hostIP: fmt.Sprintf("10.217.%d.1", b[0]), nsIP: fmt.Sprintf("10.217.%d.2", b[0])}
	if err := ipCmd("netns", "add", h.ns); err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	t.Cleanup(func() { _ = ipCmd("netns", "del", h.ns) }) // deletes the veth pair too
	for _, args := range [][]string{
		{"link", "add", h.hostIf, "type", "veth", "peer", "name", h.nsIf},
		{"link", "set", h.nsIf, "netns", h.ns},
		{"addr", "add", h.hostIP + "/30", "dev", h.hostIf},
		{"link", "set", h.hostIf, "up"},
		{"-n", h.ns, "addr", "add", h.nsIP + "/30", "dev", h.nsIf},
		{"-n", h.ns, "link", "set", h.nsIf, "up"},
	} {
		if err := ipCmd(args...); err != nil {
			t.Skipf("cannot wire a veth pair here: %v", err)
		}
	}
	return h
}

// listen opens a TCP listener inside the namespace. The socket belongs to
// the namespace for good; only its creation needs a thread switched into it.
func (h *testHost) listen(t *testing.T) net.Listener {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(self)
	target, err := unix.Open("/run/netns/"+h.ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(target)
	require.NoError(t, unix.Setns(target, unix.CLONE_NEWNET))
	ln, lerr := net.Listen("tcp", h.nsIP+":0")
	require.NoError(t, unix.Setns(self, unix.CLONE_NEWNET))
	require.NoError(t, lerr)
	return ln
}

// pullCable takes the namespace's end of the link down: packets to and from
// it vanish with no FIN and no RST, as when a host loses power.
func (h *testHost) pullCable(t *testing.T) {
	require.NoError(t, ipCmd("-n", h.ns, "link", "set", h.nsIf, "down"))
}

func (h *testHost) plugCable(t *testing.T) {
	require.NoError(t, ipCmd("-n", h.ns, "link", "set", h.nsIf, "up"))
}

// A warm, READY replica on another host loses power: queries keep being
// answered completely and within their deadline by the other replica, and
// the lost one is suspect within a few seconds.
func TestPowerOffOfAReplicaHost(t *testing.T) {
	longtest.Mark(t)
	host := newTestHost(t)
	const dim = 32
	corpus := devcluster.Corpus(400, dim, 11)
	k := vector.Generic()
	for _, r := range corpus {
		k.Normalize(r.Vector)
	}
	table := placement.New([]string{"shard-0"})
	p := &shardpb.Placement{Fingerprint: table.Fingerprint(), Shard: "shard-0"}
	// Each replica is a group of one holding the corpus, written through
	// its own log.
	serveOn := func(ln net.Listener) {
		rep := serveReplica(t, ln, dim, k)
		for i := 0; i < len(corpus); i += 256 {
			req := &shardpb.UpsertRequest{Placement: p}
			for _, r := range corpus[i:min(i+256, len(corpus))] {
				req.Vectors = append(req.Vectors, &shardpb.Vector{Id: r.ID, Vector: shard.EncodeVector(r.Vector), Payload: r.Payload})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := rep.Server.Upsert(ctx, req)
			cancel()
			require.NoError(t, err)
		}
	}
	remote := host.listen(t)
	serveOn(remote)
	local, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveOn(local)

	r, err := app.New(app.Config{Kernel: k, Shards: []app.ShardSpec{
		{Name: "shard-0", Addrs: []string{remote.Addr().String(), local.Addr().String()}},
	}})
	require.NoError(t, err)
	defer r.Close()
	srv := httptest.NewServer(r.API)
	defer srv.Close()
	waitReady(t, r)
	h := &harness{r: r, srv: srv}
	for i := range 20 { // warm both replicas' latency estimates
		a, _, _ := h.search(t, "?deadline_ms=1000", map[string]any{"vector": corpus[i].Vector, "k": 5})
		require.False(t, a.ScatterGather.Degraded)
	}

	host.pullCable(t)
	lost := time.Now()
	const deadline = 300 * time.Millisecond
	suspectAfter := time.Duration(0)
	for i := 0; time.Since(lost) < 4*time.Second; i++ {
		a, resp, took := h.search(t, "?deadline_ms=300", map[string]any{"vector": corpus[i%len(corpus)].Vector, "k": 5})
		require.Equal(t, http.StatusOK, resp.StatusCode, "query %d, %s after the power went: %s", i, time.Since(lost), a.body)
		require.False(t, a.ScatterGather.Degraded, "query %d: %v", i, a.ScatterGather.ShardErrors)
		require.Less(t, took, deadline+50*time.Millisecond, "query %d", i)
		if suspectAfter == 0 && replicaHealth(r, remote.Addr().String()).Suspect {
			suspectAfter = time.Since(lost)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("powered-off replica suspect after %s", suspectAfter)
	require.NotZero(t, suspectAfter, "the powered-off replica must be suspect within 4 s")
	host.plugCable(t)
}
