package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestImage runs `make image` (hack/image.sh): the daemonless image build,
// which reads its tarball back and runs the entrypoint with --help.
func TestImage(t *testing.T) {
	if _, err := os.Stat(filepath.Join(repoRoot(t), "cmd", "router")); err != nil {
		t.Skip("cmd/router does not exist yet")
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "hack", "image.sh"))
	t.Log(run(t, cmd))
}
