package chart

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// buildRouter builds the product's router binary from ./cmd/router, or
// returns $TRAWL_ROUTER when set (a router built elsewhere, e.g. from a branch
// with the replicated shards, to check the chart's flags against it).
func buildRouter(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("TRAWL_ROUTER"); bin != "" {
		return bin
	}
	if _, err := os.Stat(filepath.Join(repoRoot(t), "cmd", "router")); err != nil {
		t.Skip("cmd/router does not exist yet")
	}
	bin := filepath.Join(t.TempDir(), "router")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/router")
	cmd.Dir = repoRoot(t)
	run(t, cmd)
	return bin
}

// raftFlags are the shard flags of DESIGN.md's replicated shards (--peers and
// its companions). A router built before them has none of them; against such
// a binary these flags are logged, not failed, and every other flag is still
// checked. A binary with --peers must have them all.
var raftFlags = map[string]bool{
	"peers": true, "advertise-addr": true, "max-leader-silence": true, "tls-peer-ca": true,
	"raft-heartbeat-timeout": true, "raft-election-timeout": true,
}

func routerHelp(t *testing.T, bin string) map[string]string {
	t.Helper()
	help := map[string]string{}
	for _, sub := range []string{"serve", "shard"} {
		out, _ := exec.Command(bin, sub, "--help").CombinedOutput() // exits 2 after printing usage
		help[sub] = string(out)
	}
	return help
}

func hasFlag(help, name string) bool {
	return strings.Contains(help, "\n  -"+name+" ") || strings.Contains(help, "\n  -"+name+"\n")
}

// TestFlagsExist: every flag the chart passes is one the router binary has, so
// a renamed flag fails here instead of in a crash-looping pod.
func TestFlagsExist(t *testing.T) {
	bin := buildRouter(t)
	help := routerHelp(t, bin)
	replicated := hasFlag(help["shard"], "peers")
	if !replicated {
		t.Logf("this router's shard has no --peers (built before the replicated shards): not checking %v", raftFlags)
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
				if sub == "shard" && !replicated && raftFlags[name] {
					continue
				}
				if !hasFlag(help[sub], name) {
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

// TestChartArgsStartTheBinary runs the router and shard-0's replicas with
// exactly the arguments the chart renders: $(VAR) references expanded from
// each pod's env as the kubelet would, listen addresses and data directories
// moved to loopback and temporary folders, and every replica's DNS name
// (--peers, --advertise-addr, the router's --shard) mapped to its loopback
// address. The replicas of shard-0, one per zone, must form their group and
// turn ready; the router must turn ready against them. Against a router built
// before the replicated shards, the raft flags are dropped and one shard
// process stands for all replicas.
func TestChartArgsStartTheBinary(t *testing.T) {
	bin := buildRouter(t)
	replicated := hasFlag(routerHelp(t, bin)["shard"], "peers")
	objs := decodeAll(t, render(t, nil))
	sets := ofKind[*appsv1.StatefulSet](objs)
	routerArgs := ofKind[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0].Args

	// Pod 0 of every zone: its args as the kubelet hands them to the process.
	type replica struct {
		dns, grpc, http string
		args            []string
	}
	var reps []replica
	loopback := map[string]string{} // replica DNS name:port -> loopback address
	for _, s := range sets {
		c := s.Spec.Template.Spec.Containers[0]
		args := expandEnv(t, c, s.Name+"-0", 0)
		var adv string
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--advertise-addr="); ok {
				adv = v
			}
		}
		if adv == "" {
			t.Fatalf("%s: no --advertise-addr in %v", s.Name, args)
		}
		r := replica{dns: adv, grpc: freeAddr(t), http: freeAddr(t), args: args}
		loopback[adv] = r.grpc
		reps = append(reps, r)
		if !replicated {
			break
		}
	}
	mapAddrs := func(list string) string {
		var out []string
		for _, a := range strings.Split(list, ",") {
			l, ok := loopback[a]
			if !ok {
				t.Fatalf("%s names no replica the chart renders (%v)", a, loopback)
			}
			out = append(out, l)
		}
		return strings.Join(out, ",")
	}
	for _, r := range reps {
		args := rewrite(r.args, map[string]string{"--grpc-addr=": r.grpc, "--http-addr=": r.http, "--data-dir=": t.TempDir()})
		var final []string
		for _, a := range args {
			name, val, _ := strings.Cut(a, "=")
			switch {
			case !replicated && raftFlags[strings.TrimLeft(name, "-")]:
				continue
			case name == "--peers":
				a = name + "=" + mapAddrs(val)
			case name == "--advertise-addr":
				a = name + "=" + loopback[val]
			}
			final = append(final, a)
		}
		t.Logf("%s as: router %s", r.dns, strings.Join(final, " "))
		startProc(t, bin, final)
	}
	for _, r := range reps {
		probe(t, "http://"+r.http+"/healthz")
	}
	for _, r := range reps {
		probe(t, "http://"+r.http+"/readyz")
	}

	// The router dials every replica at start; point every shard at shard-0's
	// replicas so it has something real to reach.
	var shard0 []string
	for _, r := range reps {
		shard0 = append(shard0, r.grpc)
	}
	routerHTTP := freeAddr(t)
	var args []string
	for _, a := range rewrite(routerArgs, map[string]string{"--http-addr=": routerHTTP, "--qdrant-grpc-addr=": freeAddr(t)}) {
		if strings.HasPrefix(a, "--ensure-collection=") {
			// One group standing for every shard cannot hold a collection
			// as three shards (it refuses the second as a reshard), so the
			// create never completes and readiness would wait out the
			// router's --ready-timeout, as long as probe's own wait. The
			// flag's parse is TestFlagsExist's.
			continue
		}
		if name, ok := strings.CutPrefix(a, "--shard="); ok {
			n, addrs, _ := strings.Cut(name, "=")
			if n == "shard-0" && replicated && mapAddrs(addrs) != strings.Join(shard0, ",") {
				t.Errorf("router's shard-0 %s is not the replicas' --peers", addrs)
			}
			a = "--shard=" + n + "=" + strings.Join(shard0, ",")
		}
		args = append(args, a)
	}
	startProc(t, bin, args)
	probe(t, "http://"+routerHTTP+"/healthz")
	probe(t, "http://"+routerHTTP+"/readyz")
	probe(t, "http://"+routerHTTP+"/metrics")
}

// expandEnv returns a container's args with $(VAR) expanded from its env
// the way the kubelet does it, for the pod named podName with index idx:
// plain values, and the downward API's metadata.name and the
// apps.kubernetes.io/pod-index label. A $(VAR) naming no env entry would be
// passed to the process verbatim by the kubelet: that fails the test.
func expandEnv(t *testing.T, c corev1.Container, podName string, idx int) []string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			switch p := e.ValueFrom.FieldRef.FieldPath; p {
			case "metadata.name":
				env[e.Name] = podName
			case "metadata.labels['apps.kubernetes.io/pod-index']":
				env[e.Name] = strconv.Itoa(idx)
			default:
				t.Fatalf("container %s: env %s from %s, which this test cannot expand", c.Name, e.Name, p)
			}
		}
	}
	var out []string
	for _, a := range c.Args {
		for {
			i := strings.Index(a, "$(")
			if i < 0 {
				break
			}
			j := strings.Index(a[i:], ")")
			if j < 0 {
				t.Fatalf("container %s: unterminated $( in %q", c.Name, a)
			}
			name := a[i+2 : i+j]
			v, ok := env[name]
			if !ok {
				t.Fatalf("container %s: arg %q refers to $(%s), which its env does not define", c.Name, a, name)
			}
			a = a[:i] + v + a[i+j+1:]
		}
		out = append(out, a)
	}
	return out
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
