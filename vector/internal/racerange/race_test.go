//go:build race

package racerange

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/vector/internal/racerange/racechild"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const childEnv = "RACERANGE_CHILD"

// sum reads s as the kernels do: uninstrumented, reported with Read if
// report is set.
//
//go:norace
func sum(s []float32, report bool) float32 {
	if report {
		Read(s)
	}
	var t float32
	for _, v := range s {
		t += v
	}
	return t
}

// TestReadCatchesAWriteRacingANoraceLoop runs a child that writes one
// element of a slice while a //go:norace loop reads it, with no
// synchronisation between them. Reported with Read, the race detector
// stops the child (exit 66, "DATA RACE"); unreported, the race goes
// unseen, which is why every norace kernel must call Read.
func TestReadCatchesAWriteRacingANoraceLoop(t *testing.T) {
	if mode := os.Getenv(childEnv); mode != "" {
		s := make([]float32, 64)
		go func() { s[37] = 1 }()
		time.Sleep(50 * time.Millisecond) // orders the two in time, not by happens-before
		_ = sum(s, mode == "report")
		os.Exit(0)
	}
	for _, tc := range []struct {
		mode     string
		detected bool
	}{
		{"report", true},
		{"silent", false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			env := childEnv + "=" + tc.mode
			if tc.detected {
				racechild.RequireRace(t, "TestReadCatchesAWriteRacingANoraceLoop", env)
				return
			}
			out, err := racechild.Run(t, "TestReadCatchesAWriteRacingANoraceLoop", env)
			require.NoError(t, err, "%s", out)
			require.NotContains(t, string(out), "DATA RACE")
		})
	}
}
