// Package shardproc runs `router shard` and `router serve` the way an
// operator does, for tests that must not share a process with them:
// cmd/router built once (with or without -race, whatever the test runs
// under), loopback ports handed out once each, children with their output
// in log files, and a wait until they serve.
//
// A replica in the test's own process competes with the code under test
// for one Go scheduler, and under the race detector for one slowed heap;
// as its own process the kernel shares the cores out instead, as it does
// in production.
package shardproc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trawl-search/trawl/internal/localport"
)

// routerPkg is the command every child runs.
const routerPkg = "github.com/trawl-search/trawl/cmd/router"

// Binary is cmd/router, built on the first call to Path and removed by
// Remove. The zero value is ready; a test package keeps one for all its
// tests, so the binary is linked once per run.
type Binary struct {
	// Race builds it with the race detector. `go test -race` does not
	// pass -race on to this build: without Race the children run at full
	// speed while the test itself is instrumented.
	Race bool

	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the binary on first use and returns its path.
func (b *Binary) Path() (string, error) {
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "trawl-router-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "router")
		args := []string{"build", "-o", b.path}
		if b.Race {
			args = append(args, "-race")
		}
		if out, err := exec.Command("go", append(args, routerPkg)...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", routerPkg, err, out)
		}
	})
	return b.path, b.err
}

// Remove deletes the built binary, if any.
func (b *Binary) Remove() error {
	if b.dir == "" {
		return nil
	}
	return os.RemoveAll(b.dir)
}

// Ports hands out loopback ports, each at most once. A port is free when
// it is picked and taken only when the child binds it, a moment later, so
// without this two children started together (or a restarted replica and
// a router started while it was down) could be handed the same one. The
// zero value is ready; processes of one run share one Ports.
type Ports struct {
	mu   sync.Mutex
	used map[string]bool
}

// Free returns a loopback address whose port is free now and that p has
// not handed out before. Ports come from below the kernel's ephemeral
// range: a replica restarts on its old port, and in the range an outgoing
// connection (a peer redialling it) may have taken it meanwhile.
func (p *Ports) Free() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 100 {
		ln, err := localport.Listen()
		if err != nil {
			return "", fmt.Errorf("free port: %w", err)
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			return "", fmt.Errorf("free port: %w", err)
		}
		if p.used[addr] {
			continue
		}
		if p.used == nil {
			p.used = map[string]bool{}
		}
		p.used[addr] = true
		return addr, nil
	}
	return "", errors.New("free port: every free port found was handed out already")
}

// Proc is one child process, its output appended to a log file.
type Proc struct {
	Name string
	Bin  string
	Args []string
	Log  string
	// Nice, when not zero, runs the process at that niceness (nice(1)).
	// Below zero it takes a core ahead of the machine's other work, as a
	// process on a host of its own would; that needs CAP_SYS_NICE, and
	// without it nice(1) says so in the log and runs it at the caller's.
	Nice int

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start runs the process (again, after Kill) with Args.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	// The child holds its own copy of the descriptor.
	defer f.Close()
	fmt.Fprintf(f, "=== start %s %s\n", time.Now().Format(time.StampMilli), strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	if p.Nice != 0 {
		cmd = exec.Command("nice", append([]string{"-n", strconv.Itoa(p.Nice), p.Bin}, p.Args...)...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	// Every flag has a TRAWL_* twin, so the caller's variables (a test's
	// gate, a developer's TRAWL_KERNEL) would quietly configure the child.
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd = cmd
	return nil
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRAWL_") {
			env = append(env, kv)
		}
	}
	return env
}

// PID is the running process's id, or 0.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill SIGKILLs the process (a SIGSTOPped one too) and reaps it.
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// Signal sends sig to the running process, if any.
func (p *Proc) Signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
}

// Tail is the log's last n lines, for failure messages.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Shard is one `router shard` process.
type Shard struct {
	Proc
	GRPC, HTTP string // listen addresses
	Dir        string // --data-dir
}

// ReadyURL is the replica's /readyz.
func (s *Shard) ReadyURL() string { return "http://" + s.HTTP + "/readyz" }

// Ready reports whether the replica's /readyz says it serves.
func (s *Shard) Ready() bool { return Ready(s.ReadyURL()) }

// Ready reports whether url answers 200.
func Ready(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Group is one shard's replica group.
type Group struct {
	Bin   string // the router binary (Binary.Path)
	Ports *Ports
	Dir   string // data directories and logs go under it
	Name  string // the shard's name: replicas are Name/0, Name/1, ...
	// Replicas is the group's size: 1 is a group of one (no --peers).
	Replicas int
	// Args are more `router shard` flags for every replica.
	Args []string
}

// Start starts the group's replicas and returns them without waiting
// for them to serve (WaitReady). On error the ones started are killed.
func (g Group) Start() (reps []*Shard, err error) {
	defer func() {
		if err != nil {
			for _, r := range reps {
				r.Kill()
			}
		}
	}()
	if g.Ports == nil {
		return nil, errors.New("shardproc: a Group needs Ports to take addresses from")
	}
	peers := make([]string, g.Replicas)
	for i := range g.Replicas {
		s := &Shard{Dir: filepath.Join(g.Dir, fmt.Sprintf("%s-%d", g.Name, i))}
		if s.GRPC, err = g.Ports.Free(); err != nil {
			return nil, err
		}
		if s.HTTP, err = g.Ports.Free(); err != nil {
			return nil, err
		}
		peers[i] = s.GRPC
		reps = append(reps, s)
	}
	for i, s := range reps {
		args := []string{"shard", "--grpc-addr", s.GRPC, "--http-addr", s.HTTP, "--data-dir", s.Dir}
		if g.Replicas > 1 {
			args = append(args, "--peers", strings.Join(peers, ","), "--advertise-addr", s.GRPC)
		}
		s.Proc = Proc{Name: fmt.Sprintf("%s/%d", g.Name, i), Bin: g.Bin, Args: append(args, g.Args...), Log: s.Dir + ".log"}
		if err := s.Start(); err != nil {
			return reps, err
		}
	}
	return reps, nil
}

// WaitReady polls url (p's /readyz) until it answers 200, or fails with
// p's log tail (a crash's reason) when ctx ends first.
func WaitReady(ctx context.Context, p *Proc, url string) error {
	for !Ready(url) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w\n%s", p.Name, url, ctx.Err(), p.Tail(10))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
