//go:build race

package quant

import (
	"os"
	"testing"
	"time"

	"github.com/trawl-search/trawl/vector/internal/racerange/racechild"
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
			racechild.RequireRace(t, "TestGenericKernelReportsItsReads", genericRaceChild+"="+arg)
		})
	}
}
