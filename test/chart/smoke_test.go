package chart

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// buildRouter builds the product's router binary from ./cmd/router.
func buildRouter(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot(t), "cmd", "router")); err != nil {
		t.Skip("cmd/router does not exist yet")
	}
	bin := filepath.Join(t.TempDir(), "router")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/router")
	cmd.Dir = repoRoot(t)
	run(t, cmd)
	return bin
}

// TestFlagsExist: every flag the chart passes is one the router binary has, so
// a renamed flag fails here instead of in a crash-looping pod.
func TestFlagsExist(t *testing.T) {
	bin := buildRouter(t)
	help := map[string]string{}
	for _, sub := range []string{"serve", "shard"} {
		out, _ := exec.Command(bin, sub, "--help").CombinedOutput() // exits 2 after printing usage
		help[sub] = string(out)
	}
	for _, f := range ciValues(t) {
		objs := decodeAll(t, render(t, []string{f}))
		var containers []corev1.Container
		for _, d := range ofKind[*appsv1.Deployment](objs) {
			containers = append(containers, d.Spec.Template.Spec.Containers...)
		}
		for _, s := range ofKind[*appsv1.StatefulSet](objs) {
			containers = append(containers, s.Spec.Template.Spec.Containers...)
		}
		for _, c := range containers {
			sub := c.Args[0]
			if help[sub] == "" {
				t.Fatalf("%s: container %s runs unknown command %q", caseName(f), c.Name, sub)
			}
			for _, a := range c.Args[1:] {
				name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				if !strings.Contains(help[sub], "\n  -"+name+" ") && !strings.Contains(help[sub], "\n  -"+name+"\n") {
					t.Errorf("%s: router %s has no flag -%s (chart passes %s)", caseName(f), sub, name, a)
				}
			}
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestChartArgsStartTheBinary runs the router and a shard with exactly the
// arguments the chart renders (listen addresses and the data directory moved
// to loopback and a temporary folder) and asks their probe endpoints.
func TestChartArgsStartTheBinary(t *testing.T) {
	bin := buildRouter(t)
	objs := decodeAll(t, render(t, nil))
	shardArgs := ofKind[*appsv1.StatefulSet](objs)[0].Spec.Template.Spec.Containers[0].Args
	routerArgs := ofKind[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0].Args

	grpcAddr, shardHTTP := freeAddr(t), freeAddr(t)
	shard := rewrite(shardArgs, map[string]string{
		"--grpc-addr=": grpcAddr, "--http-addr=": shardHTTP, "--data-dir=": t.TempDir(),
	})
	startProc(t, bin, shard)
	probe(t, "http://"+shardHTTP+"/readyz")
	probe(t, "http://"+shardHTTP+"/healthz")

	// The router dials every replica at start; point them all at the shard
	// above so it has something real to reach.
	routerHTTP := freeAddr(t)
	var args []string
	for _, a := range rewrite(routerArgs, map[string]string{"--http-addr=": routerHTTP}) {
		if name, ok := strings.CutPrefix(a, "--shard="); ok {
			n, _, _ := strings.Cut(name, "=")
			a = "--shard=" + n + "=" + grpcAddr
		}
		args = append(args, a)
	}
	startProc(t, bin, args)
	probe(t, "http://"+routerHTTP+"/healthz")
	probe(t, "http://"+routerHTTP+"/readyz")
	probe(t, "http://"+routerHTTP+"/metrics")
}

func rewrite(args []string, repl map[string]string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		for prefix, v := range repl {
			if strings.HasPrefix(a, prefix) {
				out[i] = prefix + v
			}
		}
	}
	return out
}

func startProc(t *testing.T, bin string, args []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("router %s output:\n%s", args[0], logs.String())
		}
	})
}

func probe(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		r, err := http.Get(url)
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
			last = fmt.Sprintf("HTTP %d", r.StatusCode)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not 200 after 30 s: %s", url, last)
}
