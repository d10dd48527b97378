// Package machine describes the host a benchmark ran on: CPU, caches,
// memory, load, and the commit measured, for the header of every report.
package machine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Info is what a results table states about the run.
type Info struct {
	CPU      string   // model name from /proc/cpuinfo
	Flags    []string // the SIMD flags the kernels dispatch on
	Cores    int
	Caches   []string // "L1d 32K", ... from cpu0's sysfs cache entries
	MemTotal string
	Kernel   string
	Go       string
	Commit   string // short hash, with "-dirty" when the tree has changes
}

// Describe reads the host and the repository at root.
func Describe(ctx context.Context, root string) Info {
	in := Info{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				if in.CPU == "" {
					in.CPU = strings.TrimSpace(v)
				}
			case "flags":
				if in.Flags == nil {
					have := map[string]bool{}
					for _, f := range strings.Fields(v) {
						have[f] = true
					}
					in.Flags = []string{}
					for _, f := range []string{"avx2", "fma", "avx512f", "avx512_vnni", "amx_int8"} {
						if have[f] {
							in.Flags = append(in.Flags, f)
						}
					}
				}
			}
		}
	}
	in.Caches = caches()
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		in.MemTotal = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		in.Kernel = strings.TrimSpace(string(b))
	}
	in.Commit = commit(ctx, root)
	return in
}

func caches() []string {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	sort.Strings(dirs)
	var out []string
	for _, d := range dirs {
		read := func(f string) string {
			b, _ := os.ReadFile(filepath.Join(d, f))
			return strings.TrimSpace(string(b))
		}
		name := "L" + read("level")
		switch read("type") {
		case "Data":
			name += "d"
		case "Instruction":
			name += "i"
		}
		out = append(out, name+" "+read("size"))
	}
	return out
}

func commit(ctx context.Context, root string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	// Only tracked files count: results written by the run itself are
	// untracked or about to change, and must not mark it dirty.
	st, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/RESULTS*", ":!bench/*.png").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}

// LoadAvg is /proc/loadavg's three averages.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Markdown is a table of the host.
func (in Info) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| machine | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s, %d logical cores (%s) |\n", in.CPU, in.Cores, strings.Join(in.Flags, ", "))
	fmt.Fprintf(&b, "| caches (cpu0) | %s |\n", strings.Join(in.Caches, ", "))
	fmt.Fprintf(&b, "| memory | %s |\n", in.MemTotal)
	fmt.Fprintf(&b, "| kernel, Go | Linux %s, %s |\n", in.Kernel, in.Go)
	fmt.Fprintf(&b, "| commit | %s |\n", in.Commit)
	return b.String()
}
