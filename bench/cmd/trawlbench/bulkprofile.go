package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times
// (100 on every Linux platform Go supports).
const clockTicks = 100

// procCPU is the user + system CPU time a process has used so far, from
// /proc/PID/stat; 0 if it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are space-separated, utime and stime 14th and
	// 15th of the line (12th and 13th after it).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / clockTicks
}

// cpuMeter reads the CPU time of a cluster's processes by name.
type cpuMeter struct{ procs map[string]*cluster.Proc }

func newCPUMeter(c *cluster.Cluster, routers ...*cluster.Router) cpuMeter {
	m := cpuMeter{procs: map[string]*cluster.Proc{}}
	for _, reps := range c.Shards {
		for _, r := range reps {
			m.procs[r.Name] = &r.Proc
		}
	}
	for _, r := range routers {
		m.procs[r.Name] = &r.Proc
	}
	return m
}

func (m cpuMeter) read() map[string]time.Duration {
	out := make(map[string]time.Duration, len(m.procs))
	for name, p := range m.procs {
		out[name] = procCPU(p.PID())
	}
	return out
}

// profileTargets are the base URLs to profile by name: every replica's
// HTTP port and the loading router's.
func profileTargets(c *cluster.Cluster, loading *cluster.Router) map[string]string {
	ts := map[string]string{"router-A": loading.Base}
	for _, reps := range c.Shards {
		for _, r := range reps {
			ts[strings.ReplaceAll(r.Name, "/", "-")] = "http://" + r.HTTP
		}
	}
	return ts
}

// captureProfiles takes a CPU profile of every target for d, all at
// once, then their block and mutex profiles (counted since each process
// started), into dir as NAME.cpu.pprof, NAME.block.pprof and
// NAME.mutex.pprof, and with traceFor an execution trace that long,
// NAME.trace. Errors are reported, not fatal: a profile is an aid.
func captureProfiles(ctx context.Context, dir string, d, traceFor time.Duration, targets map[string]string) []error {
	hc := &http.Client{Timeout: d + traceFor + 30*time.Second}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	get := func(name, url, file string) {
		err := fetchTo(ctx, hc, url, filepath.Join(dir, file))
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			mu.Unlock()
		}
	}
	for name, base := range targets {
		wg.Go(func() {
			get(name, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(d.Seconds())), name+".cpu.pprof")
			get(name, base+"/debug/pprof/block", name+".block.pprof")
			get(name, base+"/debug/pprof/mutex", name+".mutex.pprof")
			if traceFor > 0 {
				get(name, fmt.Sprintf("%s/debug/pprof/trace?seconds=%g", base, traceFor.Seconds()), name+".trace")
			}
		})
	}
	wg.Wait()
	return errs
}

func fetchTo(ctx context.Context, hc *http.Client, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
