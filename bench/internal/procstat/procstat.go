// Package procstat reads a process's CPU time from /proc/<pid>/stat, to
// charge a process (the router) its CPU per query over a run.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ: /proc reports utime and stime in 1/100 s on every
// Linux architecture Go supports (the kernel fixes it for user space).
const clockTick = 10 * time.Millisecond

// CPU is the user plus system time pid has used, at 10 ms resolution.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of %d: %w", pid, err)
	}
	return parseStat(string(b))
}

func parseStat(s string) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no command name", s)
	}
	f := strings.Fields(s[i+1:])
	// After the name: state is field 3, utime field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat %q: %d fields after the name", s, len(f))
	}
	var ticks int64
	for _, x := range f[11:13] {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// RunQueueWait is how long pid's threads have waited on a run queue for a
// CPU (the second field of /proc/<pid>/task/*/schedstat), summed over the
// threads alive now: the time the process was ready to run but had no
// core. Threads that exited are not counted.
func RunQueueWait(pid int) (time.Duration, error) {
	dirs, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, fmt.Errorf("run-queue wait of %d: %w", pid, err)
	}
	var total time.Duration
	for _, d := range dirs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, d.Name()))
		if err != nil {
			continue // the thread exited meanwhile
		}
		w, err := parseSchedstat(string(b))
		if err != nil {
			return 0, err
		}
		total += w
	}
	return total, nil
}

func parseSchedstat(s string) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, fmt.Errorf("schedstat %q: %d fields", s, len(f))
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("schedstat %q: %w", s, err)
	}
	return time.Duration(ns), nil
}
