package localport

import (
	"net"
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
