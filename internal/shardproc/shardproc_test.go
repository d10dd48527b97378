package shardproc_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/shardproc"
)

// Ports hands out each address once, and each was free when handed out.
func TestPortsAreHandedOutOnce(t *testing.T) {
	var p shardproc.Ports
	seen := map[string]bool{}
	for range 200 {
		addr, err := p.Free()
		require.NoError(t, err)
		require.False(t, seen[addr], "%s handed out twice", addr)
		seen[addr] = true
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "%s was handed out but cannot be bound", addr)
		require.NoError(t, ln.Close())
	}
}

func TestGroupNeedsPorts(t *testing.T) {
	_, err := shardproc.Group{Bin: "/bin/true", Dir: t.TempDir(), Name: "s", Replicas: 1}.Start()
	require.Error(t, err)
}

// A process's output goes to its log after a start line, it runs at its
// niceness, it does not inherit TRAWL_* variables, and Kill reaps it.
func TestProcLogsNiceAndEnvironment(t *testing.T) {
	t.Setenv("TRAWL_SOMETHING", "leaked")
	t.Setenv("OTHER_THING", "kept")
	dir := t.TempDir()
	// nice(1) adds to the niceness the test runs at.
	out, err := exec.Command("nice").Output()
	require.NoError(t, err)
	base, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	tests := []struct {
		name string
		nice int
		want string
	}{
		{name: "plain", want: fmt.Sprintf("nice=%d trawl= other=kept", base)},
		// A positive niceness needs no privilege, so the check holds for
		// any user.
		{name: "niced", nice: 5, want: fmt.Sprintf("nice=%d trawl= other=kept", min(base+5, 19))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(dir, tc.name+".log")
			p := &shardproc.Proc{Name: tc.name, Bin: "/bin/sh", Nice: tc.nice, Log: log,
				Args: []string{"-c", `echo "nice=$(nice) trawl=$TRAWL_SOMETHING other=$OTHER_THING"; exec sleep 60`}}
			require.NoError(t, p.Start())
			require.NotZero(t, p.PID())
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(log)
				return err == nil && strings.Contains(string(b), "other=kept")
			}, 10*time.Second, 10*time.Millisecond)
			p.Kill()
			require.Zero(t, p.PID())
			tail := p.Tail(2)
			require.Contains(t, tail, "=== start ")
			require.Contains(t, tail, tc.want)
		})
	}
}
