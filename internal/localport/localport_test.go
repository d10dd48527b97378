package localport

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Listen's ports are below the ephemeral range, where no outgoing
// connection is ever given one.
func TestListenIsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := Range()
	require.Less(t, lo, hi)
	for range 20 {
		ln, err := Listen()
		require.NoError(t, err)
		_, p, err := net.SplitHostPort(ln.Addr().String())
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		require.GreaterOrEqual(t, port, lo)
		require.Less(t, port, hi)
		require.NoError(t, ln.Close())
	}
}

// A restart gets its port back once whoever held it lets go, and says
// "in use" when they do not let go within the wait.
func TestRelisten(t *testing.T) {
	held, err := Listen()
	require.NoError(t, err)
	addr := held.Addr().String()

	_, err = Relisten(addr, 100*time.Millisecond)
	require.ErrorIs(t, err, syscall.EADDRINUSE)

	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(200 * time.Millisecond)
		held.Close()
	}()
	ln, err := Relisten(addr, time.Minute)
	require.NoError(t, err)
	require.Equal(t, addr, ln.Addr().String())
	require.NoError(t, ln.Close())
	<-released
}

// A reserved port is never handed out again, by this process or any
// other, while the process that reserved it lives: the restart of a
// stopped server finds it free (a cold make test once failed a dev
// cluster's restart on a port another test binary had picked meanwhile).
func TestListenSkipsReservedPorts(t *testing.T) {
	dir := t.TempDir()
	lo, hi := freePair(t)

	ok, err := reserve(dir, lo)
	require.NoError(t, err)
	require.True(t, ok)
	again, err := reserve(dir, lo)
	require.NoError(t, err)
	require.False(t, again, "the lock belongs to the open file: the same process cannot take it twice")

	ln, err := listen(dir, lo, hi)
	require.NoError(t, err)
	require.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(hi-1)), ln.Addr().String(), "the one port of the two not reserved")
	require.NoError(t, ln.Close())
	// hi-1 stays reserved with its listener closed, as a stopped server's.
	_, err = listen(dir, lo, hi)
	require.ErrorContains(t, err, "reserved", "every port of the range reserved")

	// Another process sees both reservations.
	for _, port := range []int{lo, hi - 1} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReserveHelper$")
		cmd.Env = append(os.Environ(), "LOCALPORT_HELPER_DIR="+dir, "LOCALPORT_HELPER_PORT="+strconv.Itoa(port))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		require.Contains(t, string(out), "reserved elsewhere", "port %d", port)
	}
}

// TestReserveHelper runs in a child process of TestListenSkipsReservedPorts.
func TestReserveHelper(t *testing.T) {
	dir, port := os.Getenv("LOCALPORT_HELPER_DIR"), os.Getenv("LOCALPORT_HELPER_PORT")
	if dir == "" {
		t.Skip("a helper process of TestListenSkipsReservedPorts")
	}
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	ok, err := reserve(dir, p)
	require.NoError(t, err)
	if !ok {
		fmt.Println("reserved elsewhere")
	}
}

// freePair finds two adjacent ports below the ephemeral range that
// nothing listens on now, and reserves them machine-wide so that no other
// caller of Listen takes one while the test uses them.
func freePair(t *testing.T) (lo, hi int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(reserveDir(), 0o777))
	rlo, rhi := Range()
	for port := rlo + 5000; port < rhi-1; port++ {
		if ok, err := reserve(reserveDir(), port); err != nil || !ok {
			continue
		}
		if ok, err := reserve(reserveDir(), port+1); err != nil || !ok {
			continue
		}
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1)))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return port, port + 2
	}
	t.Fatal("no two free adjacent ports")
	return 0, 0
}
