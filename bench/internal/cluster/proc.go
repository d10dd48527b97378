// Package cluster starts and tears down trawl the way an operator runs it,
// on loopback: real `router shard` processes (raft groups of three, or
// groups of one), a fault proxy (internal/faultproxy, run inside this
// process) in front of every replica's gRPC port, and real `router serve`
// processes that reach the replicas only through those proxies, so a
// benchmark can refuse, blackhole or slow one replica while the raft group
// behind it carries on.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/trawl-search/trawl/internal/localport"
	"github.com/trawl-search/trawl/internal/shardproc"
)

// Build compiles cmd/router of the repository at root into dir and
// returns the binary's path. It builds inside the main module, so the
// binary has trawl's own dependency versions, not the bench module's.
func Build(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "router")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/router")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/router: %w\n%s", err, b)
	}
	return out, nil
}

// Proc is one child process with its output in a log file.
type Proc struct {
	Name string
	Bin  string
	Args []string
	Log  string
	// Env is added to the caller's environment (less its TRAWL_*
	// variables), for a process configured by environment.
	Env []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start runs the process; its output is appended to Log.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	defer f.Close()
	fmt.Fprintf(f, "=== start %s %s\n", time.Now().Format(time.StampMilli), strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = f, f
	// TRAWL_* variables of the caller would override the flags' defaults
	// in the child (every flag has an environment twin).
	cmd.Env = append(cleanEnv(), p.Env...)
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

// Kill SIGKILLs the process and reaps it.
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

// Tail is the last n lines of the log, for error messages.
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

// Ports hands out loopback ports, each at most once (shardproc.Ports):
// clusters started together share one.
type Ports = shardproc.Ports

// FreePort reserves a loopback port below the kernel's ephemeral range
// and releases it for a child to take. Below the range, because a port
// from it can be taken by any outgoing connection once its process dies
// (a peer redialling a killed replica can even connect to itself), and
// the replica restarted on it would find it in use. Processes started at
// the same time take theirs from one Ports instead.
func FreePort() (string, error) {
	ln, err := localport.Listen()
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	return ln.Addr().String(), ln.Close()
}

// waitReady polls url until it answers 200 or timeout passes.
func waitReady(ctx context.Context, p *Proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.PID() == 0 {
			return fmt.Errorf("%s is not running", p.Name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %s: %w\n%s", p.Name, url, timeout, ctx.Err(), p.Tail(10))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errs joins errors, keeping nil when there are none.
func errs(es []error) error { return errors.Join(es...) }

// WaitReady polls url until it answers 200, p exits or timeout passes.
func WaitReady(ctx context.Context, p *Proc, url string, timeout time.Duration) error {
	return waitReady(ctx, p, url, timeout)
}
