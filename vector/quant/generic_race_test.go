//go:build race

package quant

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const genericRaceChild = "TRAWL_QUANT_GENERIC_RACE_CHILD"

// TestGenericKernelReportsItsReads: the portable int8 kernel is built
// //go:norace, so the race detector sees its reads only through
// racerange. A child writes one code of a row while the kernel reads it
// unsynchronised; the race must be reported (exit 66). Dropping either
// racerange.Read makes the child pass silently, and this fail.
func TestGenericKernelReportsItsReads(t *testing.T) {
	if arg := os.Getenv(genericRaceChild); arg != "" {
		a, b := make([]int8, 64), make([]int8, 64)
		row := map[string][]int8{"a": a, "b": b}[arg]
		go func() { row[37] = 1 }()
		time.Sleep(50 * time.Millisecond) // orders the two in time, not by happens-before
		_ = dotGeneric(a, b)
		os.Exit(0)
	}
	for _, arg := range []string{"a", "b"} {
		t.Run(arg, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestGenericKernelReportsItsReads$")
			cmd.Env = append(os.Environ(), genericRaceChild+"="+arg)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			require.Equal(t, 66, exit.ExitCode(), "%s", out)
			require.Contains(t, string(out), "WARNING: DATA RACE")
		})
	}
}
