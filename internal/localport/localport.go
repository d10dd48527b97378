package localport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Range is the 12 000 ports below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), or 20000–32000 where that
// cannot be read: [lo, hi).
func Range() (lo, hi int) {
	lo, hi = 20000, 32000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var start, end int
		if _, err := fmt.Sscan(string(b), &start, &end); err == nil && start > 2048 {
			lo, hi = max(1024, start-12000), start
		}
	}
	return lo, hi
}

// Listen binds a TCP listener on 127.0.0.1 at a random free port of
// Range, and reserves that port on this machine for the rest of the
// process's life (see reserve): another process calling Listen, or this
// one again, never picks it, so a server this process stops can bind it
// again (Relisten) however long it stays down.
func Listen() (net.Listener, error) {
	lo, hi := Range()
	return listen(reserveDir(), lo, hi)
}

// listen is Listen over [lo, hi), with reservations in dir; where dir
// cannot be used (unwritable, or the process is out of file descriptors)
// it binds without reserving, as before reservations existed.
func listen(dir string, lo, hi int) (net.Listener, error) {
	reservable := os.MkdirAll(dir, 0o777) == nil
	var last error
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if reservable {
			ok, err := reserve(dir, port)
			if err != nil {
				reservable = false
			} else if !ok {
				last = fmt.Errorf("port %d: reserved by another caller", port)
				continue
			}
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			return ln, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no free loopback port in %d..%d after 1000 tries: %w", lo, hi, last)
}

// reserveDir holds one lock file per reserved port, shared by every
// process on the machine.
func reserveDir() string { return filepath.Join(os.TempDir(), "trawl-localport") }

// Relisten binds addr again, as a restarted server must. Another process
// that picked the same port at random in the meantime (Listen's callers
// compete for Range) may hold it for a moment, so an address in use is
// retried until wait has passed.
func Relisten(addr string, wait time.Duration) (net.Listener, error) {
	deadline := time.Now().Add(wait)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return ln, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
