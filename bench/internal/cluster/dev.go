package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DevShard is one shard a devshards process serves: its name and its
// replicas' proxy addresses.
type DevShard struct {
	Name  string   `json:"name"`
	Addrs []string `json:"addrs"`
}

// DevSpec is what a devshards process writes once it serves.
type DevSpec struct {
	Shards []DevShard `json:"shards"`
	// CA, when set, is the CA file the shards' TLS certificate chains to.
	CA string `json:"ca,omitempty"`
	// Seeded is how long starting and seeding took.
	Seeded time.Duration `json:"seeded"`
}

// DevShards is a `trawlbench devshards` process: many in-process shards
// (internal/devcluster) in one child, and the routers started over them.
type DevShards struct {
	Proc
	Spec    DevSpec
	bin     string // the router binary
	dir     string
	ports   *Ports // the routers'
	routers []*Router
}

// StartDev runs self (the trawlbench binary) as `devshards args...`
// writing under dir, and waits until its shards serve. Its routers take
// their ports from ports (nil: its own), which DevShards started at the
// same time must share; the shards' process takes its own from the
// kernel.
func StartDev(ctx context.Context, ports *Ports, self, routerBin, dir, name string, args ...string) (*DevShards, error) {
	if ports == nil {
		ports = &Ports{}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, name+".json")
	d := &DevShards{bin: routerBin, dir: dir, ports: ports, Proc: Proc{Name: name, Bin: self, Log: filepath.Join(dir, name+".log"),
		Args: append([]string{"devshards", "-out", out, "-data-dir", filepath.Join(dir, name+"-data")}, args...)}}
	if err := d.Start(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		if b, err := os.ReadFile(out); err == nil {
			if err := json.Unmarshal(b, &d.Spec); err != nil {
				d.Close()
				return nil, fmt.Errorf("%s: %w", out, err)
			}
			return d, nil
		}
		if !d.alive() {
			d.Close()
			return nil, fmt.Errorf("%s exited before serving:\n%s", name, d.Tail(20))
		}
		select {
		case <-ctx.Done():
			d.Close()
			return nil, fmt.Errorf("%s not serving: %w\n%s", name, ctx.Err(), d.Tail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// alive reports whether the child has not exited: a dead child stays a
// zombie until Kill reaps it, so its state is read from /proc.
func (p *Proc) alive() bool {
	pid := p.PID()
	if pid == 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// ShardFlags are `router serve` --shard flags for the spec's shards.
func (d *DevShards) ShardFlags() []string {
	var out []string
	for _, s := range d.Spec.Shards {
		out = append(out, "--shard", s.Name+"="+strings.Join(s.Addrs, ","))
	}
	if d.Spec.CA != "" {
		out = append(out, "--tls-ca", d.Spec.CA)
	}
	return out
}

// StartRouter runs `router serve` over the shards (with --tls-ca when
// they serve TLS) and waits for /readyz.
func (d *DevShards) StartRouter(ctx context.Context, name string, extra ...string) (*Router, error) {
	r, err := startRouter(ctx, d.ports, d.bin, d.dir, name, d.ShardFlags(), extra)
	if r != nil {
		d.routers = append(d.routers, r)
	}
	return r, err
}

// Close kills the routers and the shards' process.
func (d *DevShards) Close() {
	for _, r := range d.routers {
		r.Kill()
	}
	d.Kill()
}
