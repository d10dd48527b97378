package cluster

import (
	"net"
	"sync"
	"testing"
)

// Clusters started at the same time ask one Ports at once: no port may be
// handed out twice, though each is free (and so could be picked again)
// until its child binds it.
func TestPortsNeverHandOutAPortTwice(t *testing.T) {
	var p Ports
	const n = 400
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = p.Free() })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, a := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if seen[a] {
			t.Fatalf("port %s handed out twice", a)
		}
		seen[a] = true
		if host, _, err := net.SplitHostPort(a); err != nil || host != "127.0.0.1" {
			t.Fatalf("port %q: not a loopback address (%v)", a, err)
		}
	}
}
