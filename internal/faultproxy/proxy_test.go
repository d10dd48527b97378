package faultproxy

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo serves a line echo on loopback.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				s := bufio.NewScanner(c)
				for s.Scan() {
					if _, err := c.Write(append(s.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string, wait time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return line, err
}

func TestModes(t *testing.T) {
	p, err := StartLoopback(echo(t)) // stopped and restored on its port
	require.NoError(t, err)
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	got, err := roundTrip(c, "hello", time.Second)
	require.NoError(t, err)
	require.Equal(t, "hello\n", got)

	// Blackhole: the open connection stays open and goes silent.
	require.NoError(t, p.Blackhole())
	_, err = roundTrip(c, "lost", 200*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "silence, not a reset: %v", err)

	// Restore cuts blackholed connections; new ones work.
	require.NoError(t, p.Restore())
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	got, err = roundTrip(c2, "back", time.Second)
	require.NoError(t, err)
	require.Equal(t, "back\n", got)

	// Slow delays each chunk.
	require.NoError(t, p.Slow(100*time.Millisecond))
	t0 := time.Now()
	_, err = roundTrip(c2, "slow", 2*time.Second)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(t0), 200*time.Millisecond, "delayed both ways")

	// Stop refuses new connections on the same address.
	p.Stop()
	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	require.Error(t, err)
	require.NoError(t, p.Restore())
	c3, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c3.Close()
	got, err = roundTrip(c3, "again", time.Second)
	require.NoError(t, err)
	require.Equal(t, "again\n", got)
}

// SlowSome delays about its share of replies, each by at least d, and
// never a request; a share outside (0, 1] is refused.
func TestSlowSome(t *testing.T) {
	p, err := Start("127.0.0.1:0", echo(t))
	require.NoError(t, err)
	defer p.Close()
	require.Error(t, p.SlowSome(time.Millisecond, 0, 1))
	require.Error(t, p.SlowSome(time.Millisecond, 1.5, 1))

	for _, tc := range []struct {
		name   string
		share  float64
		lo, hi int // replies of 40 at least d late
	}{
		{"every reply", 1, 40, 40},
		{"a quarter", 0.25, 2, 21}, // binomial(40, 0.25): mean 10, ±4σ
	} {
		t.Run(tc.name, func(t *testing.T) {
			const d = 100 * time.Millisecond
			require.NoError(t, p.SlowSome(d, tc.share, 7))
			c, err := net.Dial("tcp", p.Addr())
			require.NoError(t, err)
			defer c.Close()
			late := 0
			for i := range 40 {
				t0 := time.Now()
				got, err := roundTrip(c, fmt.Sprint("m", i), 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, fmt.Sprint("m", i, "\n"), got)
				if time.Since(t0) >= d {
					late++
				}
			}
			require.GreaterOrEqual(t, late, tc.lo)
			require.LessOrEqual(t, late, tc.hi)
		})
	}
	require.NoError(t, p.Restore())
	mode, delay := p.Mode()
	require.Equal(t, Pass, mode)
	require.Zero(t, delay)
}

// Mute delivers requests and drops their replies; Restore cuts the muted
// connection, and a new one works.
func TestMute(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	got := make(chan string, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					got <- s.Text()
					if _, err := c.Write(append(s.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	defer func() { ln.Close(); <-done }()
	p, err := Start("127.0.0.1:0", ln.Addr().String())
	require.NoError(t, err)
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = roundTrip(c, "warm", time.Second)
	require.NoError(t, err)
	require.Equal(t, "warm", <-got)

	require.NoError(t, p.Mute())
	_, err = roundTrip(c, "delivered", 300*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "no reply, no reset: %v", err)
	require.Equal(t, "delivered", <-got, "the request reached the target")

	require.NoError(t, p.Restore())
	_, err = roundTrip(c, "after", time.Second)
	require.Error(t, err, "the muted connection is cut")
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	line, err := roundTrip(c2, "back", time.Second)
	require.NoError(t, err)
	require.Equal(t, "back\n", line)
}
