// Package faultproxy is a TCP proxy that injects the faults trawl must
// survive: refused connections (a killed replica), a blackhole (a warm
// connection that goes silent, like a powered-off host: no FIN, no RST),
// replies lost on their way back (a request delivered, its answer never),
// and added latency. router dev puts one in front of every replica, and
// tests use it to break real gRPC connections on loopback.
//
// It is a fault injector, not fault handling: handling lives in package
// fanout. It must never be wired into router serve.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/trawl-search/trawl/internal/localport"
)

// Mode is what the proxy does to traffic.
type Mode int

const (
	// Pass forwards everything.
	Pass Mode = iota
	// Blackhole accepts connections and keeps them open but forwards
	// nothing in either direction.
	Blackhole
	// Stopped closes the listener and every connection: new connections
	// are refused.
	Stopped
	// Mute forwards requests (client to target) and drops replies: the
	// target receives and acts on what it is sent, and the client never
	// hears back.
	Mute
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Blackhole:
		return "blackhole"
	case Stopped:
		return "stopped"
	case Mute:
		return "mute"
	}
	return "unknown"
}

// Proxy forwards one listening address to one target.
type Proxy struct {
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	mode  Mode
	delay time.Duration
	// share of reply chunks delayed (SlowSome), drawn from rng; 0 with
	// Slow, which delays every chunk both ways.
	share float64
	rng   *rand.Rand
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start listens on listen (e.g. "127.0.0.1:0") and forwards to target.
func Start(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	return newProxy(ln, target), nil
}

// StartLoopback listens on a loopback port below the ephemeral range
// (localport) and forwards to target. Prefer it to Start for a proxy that
// is stopped and restored: Restore listens on the same port again, and a
// port from the ephemeral range may be taken by any outgoing connection
// while the proxy is stopped.
func StartLoopback(target string) (*Proxy, error) {
	ln, err := localport.Listen()
	if err != nil {
		return nil, err
	}
	return newProxy(ln, target), nil
}

func newProxy(ln net.Listener, target string) *Proxy {
	p := &Proxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p
}

// Addr is the proxy's listening address; it stays the same across Stop and
// Restore.
func (p *Proxy) Addr() string { return p.addr }

// Mode reports the current mode and added delay.
func (p *Proxy) Mode() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

func (p *Proxy) serve(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.handle(c)
			}()
		}
	}()
}

func (p *Proxy) handle(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(server, client, false) }()
	go func() { defer wg.Done(); p.pipe(client, server, true) }()
	wg.Wait()
	p.untrack(client, server)
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Stopped {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

// pipe copies src to dst (reply: from the target back to the client),
// holding data back while blackholed and delaying it while slow. Data
// read during a blackhole is dropped, as a dead link would.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			mode, delay := p.mode, p.delay
			if p.share > 0 && (!reply || p.rng.Float64() >= p.share) {
				delay = 0
			}
			p.mu.Unlock()
			if mode == Blackhole || (mode == Mute && reply) {
				continue
			}
			if delay > 0 {
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

func (p *Proxy) closeConnsLocked() {
	for c := range p.conns {
		c.Close()
	}
}

// Stop refuses new connections and cuts existing ones, like a killed
// process.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Stopped {
		return
	}
	p.mode = Stopped
	p.ln.Close()
	p.closeConnsLocked()
}

// Blackhole makes every connection, open or new, silent in both
// directions.
func (p *Proxy) Blackhole() error {
	if err := p.Restore(); err != nil {
		return err
	}
	p.mu.Lock()
	p.mode = Blackhole
	p.mu.Unlock()
	return nil
}

// Mute drops every reply, on open connections and new ones, while
// requests still reach the target. Restore then cuts the connections
// (their streams lost bytes), as a link that fails after delivering a
// request and before its answer.
func (p *Proxy) Mute() error {
	if err := p.Restore(); err != nil {
		return err
	}
	p.mu.Lock()
	p.mode = Mute
	p.mu.Unlock()
	return nil
}

// Slow adds d before forwarding each chunk of data.
func (p *Proxy) Slow(d time.Duration) error {
	if err := p.Restore(); err != nil {
		return err
	}
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
	return nil
}

// SlowSome adds d before forwarding a reply chunk (target to client)
// with probability share, drawn from a generator seeded with seed: a
// gRPC answer small enough for one chunk (a search reply is) is then late
// by d on about share of calls, and the chunks behind it on the same
// connection wait, as on a link that stalls now and then. Requests pass
// undelayed.
func (p *Proxy) SlowSome(d time.Duration, share float64, seed uint64) error {
	if share <= 0 || share > 1 {
		return fmt.Errorf("faultproxy: share %v outside (0, 1]", share)
	}
	if err := p.Restore(); err != nil {
		return err
	}
	p.mu.Lock()
	p.delay, p.share, p.rng = d, share, rand.New(rand.NewPCG(seed, 0x736c6f77))
	p.mu.Unlock()
	return nil
}

// Restore forwards normally again. Connections that were blackholed or
// muted are cut (a host coming back has forgotten them; a muted stream
// lost bytes) and clients reconnect; a stopped proxy listens again on its
// address.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.mode {
	case Stopped:
		// Whoever took the port while it was closed may hold it a moment.
		ln, err := localport.Relisten(p.addr, 5*time.Second)
		if err != nil {
			return err
		}
		p.serve(ln)
	case Blackhole, Mute:
		p.closeConnsLocked()
	}
	p.mode, p.delay, p.share = Pass, 0, 0
	return nil
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.Stop()
	p.wg.Wait()
}
