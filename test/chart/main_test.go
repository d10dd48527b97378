package chart

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden from the current chart")

// kubeVersion is passed to helm template: a helm built with `go install` has no
// version stamped in and would otherwise assume an old Kubernetes. It matches
// the API server that `make test-cluster` builds.
const kubeVersion = "1.37.2"

const (
	releaseName = "trawl"
	namespace   = "trawl"
)

// repoRoot is the repository's top directory (two levels above this file).
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "helm", "trawl") }

// tool returns the command for helm or promtool: $HELM / $PROMTOOL when set
// (make test-chart builds them into .bin/), else `go tool` from the pinned
// tools module, which builds them on first use.
func tool(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	if p := os.Getenv(strings.ToUpper(name)); p != "" {
		return exec.Command(p, args...)
	}
	modfile := filepath.Join(repoRoot(t), "tools", "chart", "go.mod")
	return exec.Command("go", append([]string{"tool", "-modfile=" + modfile, name}, args...)...)
}

func run(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, out, stderr.String())
	}
	return string(out)
}

// ciValues lists the chart's ci/*-values.yaml matrix.
func ciValues(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(t), "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ci values files: %v", err)
	}
	return files
}

func caseName(valuesFile string) string {
	return strings.TrimSuffix(filepath.Base(valuesFile), "-values.yaml")
}

// render runs helm template with the given values files and --set flags.
func render(t testing.TB, valuesFiles []string, sets ...string) string {
	t.Helper()
	return renderAs(t, false, valuesFiles, sets...)
}

// renderAs is render as an install (upgrade false) or as an upgrade.
func renderAs(t testing.TB, upgrade bool, valuesFiles []string, sets ...string) string {
	t.Helper()
	args := []string{"template", releaseName, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion}
	if upgrade {
		args = append(args, "--is-upgrade")
	}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return run(t, tool(t, "helm", args...))
}
