// Package racechild runs a test's own binary again as a child that races
// on purpose, for the tests that show a //go:norace loop's reads still
// reach the race detector (racerange): the race must stop the child, not
// the test.
//
// It is for tests only: production code must never import it.
package racechild

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// Run runs the test binary's test named test as a child process, with
// env ("NAME=value") added to its environment, and returns its combined
// output and its error (an *exec.ExitError when it exits non-zero).
func Run(t *testing.T, test, env string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env)
	return cmd.CombinedOutput()
}

// RequireRace runs the child as Run does and requires the race detector
// to have stopped it: exit status 66 and its "WARNING: DATA RACE" report.
func RequireRace(t *testing.T, test, env string) {
	t.Helper()
	out, err := Run(t, test, env)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the child was not stopped by the race detector: %v\n%s", err, out)
	require.Equal(t, 66, exit.ExitCode(), "%s", out)
	require.Contains(t, string(out), "WARNING: DATA RACE")
}
