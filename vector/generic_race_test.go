//go:build race

package vector

import (
	"os"
	"testing"
	"time"

	"github.com/trawl-search/trawl/vector/internal/racerange/racechild"
)

const genericRaceChild = "TRAWL_GENERIC_RACE_CHILD"

// TestGenericKernelsReportTheirReads: the portable kernels are built
// //go:norace, so the race detector sees their reads only through
// racerange. A child writes one element of a row while each kernel reads
// it unsynchronised; the race must be reported (exit 66). Dropping a
// kernel's racerange.Read makes its case pass silently, and this fail.
func TestGenericKernelsReportTheirReads(t *testing.T) {
	k := Generic()
	kernels := map[string]func(a, b []float32) float32{"dot": k.Dot, "l2": k.L2Squared}
	if name := os.Getenv(genericRaceChild); name != "" {
		a, b := make([]float32, 64), make([]float32, 64)
		go func() { a[37] = 1 }()
		time.Sleep(50 * time.Millisecond) // orders the two in time, not by happens-before
		_ = kernels[name](a, b)
		os.Exit(0)
	}
	for name := range kernels {
		t.Run(name, func(t *testing.T) {
			racechild.RequireRace(t, "TestGenericKernelsReportTheirReads", genericRaceChild+"="+name)
		})
	}
}
