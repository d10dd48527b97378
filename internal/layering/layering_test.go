package layering

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const mod = "github.com/trawl-search/trawl"

// rule: no package matching from may depend, through others too, on a
// package matching never; with direct, only its own imports count.
type rule struct {
	from   []string
	never  []string
	direct bool
	why    string
}

var rules = []rule{
	{
		from:  []string{"api", "api/...", "coordinator", "fanout"},
		never: []string{"shard/server", "shard/raftnode", "shard/raftgrpc", "shard/store", "shard/replica", "github.com/hashicorp/raft"},
		why:   "the router side calls replicas through shard/client only",
	},
	{
		from:   []string{"api", "api/...", "!api/qdrant/qdrantgrpc", "!api/qdrant/qdrantpb"},
		never:  []string{"shard", "shard/...", "google.golang.org/grpc"},
		direct: true,
		why:    "api knows HTTP and nothing about shards",
	},
	{
		from:   []string{"api/qdrant/qdrantgrpc", "api/qdrant/qdrantpb"},
		never:  []string{"shard", "shard/..."},
		direct: true,
		why:    "Qdrant's gRPC API is a client API: it reaches shards through the coordinator only",
	},
	{
		from:  []string{"api/qdrant/qdrantpb"},
		never: []string{"..."},
		why:   "qdrantpb is generated code and imports nothing of trawl's",
	},
	{
		from:  []string{"internal/localport"},
		never: []string{"..."},
		why:   "localport is a leaf that servers and test harnesses alike take ports from",
	},
	{
		from:  []string{"internal/longtest"},
		never: []string{"..."},
		why:   "every package's tests take longtest.Mark, so it imports nothing of trawl's",
	},
	{
		from:  []string{"api", "api/qdrant", "api/qdrant/internal/...", "api/internal/..."},
		never: []string{"api/qdrant/qdrantgrpc"},
		why:   "the HTTP dialects do not depend on the gRPC transport beside them",
	},
	{
		from:  []string{"fanout"},
		never: []string{"shard", "shard/..."},
		why:   "fanout is generic over a call function",
	},
	{
		from:  []string{"shard/store"},
		never: []string{"github.com/hashicorp/raft", "google.golang.org/grpc", "shard", "shard/shardpb", "shard/server", "shard/raftnode", "shard/raftgrpc", "shard/client", "shard/replica"},
		why:   "the store is about vectors, never replication or the network",
	},
	{
		from:  []string{"shard/raftnode", "shard/raftgrpc"},
		never: []string{"shard/store", "shard/server", "shard/replica", "filter", "filter/..."},
		why:   "replication knows nothing about vectors",
	},
	{
		from:  []string{"shard/recovery"},
		never: []string{"shard", "shard/...", "!shard/recovery", "github.com/hashicorp/raft", "google.golang.org/grpc"},
		why:   "the recovery throttle is a leaf: the packages it paces take it as an interface",
	},
	{
		from:   []string{"shard/store", "shard/server", "shard/raftnode", "shard/raftgrpc"},
		never:  []string{"shard/recovery"},
		direct: true,
		why:    "paced work takes a Pacer where it is consumed; the replica wires the throttle in",
	},
	{
		from:  []string{"shard", "shard/client"},
		never: []string{"shard/store", "shard/server", "shard/raftnode", "shard/raftgrpc", "shard/replica", "github.com/hashicorp/raft"},
		why:   "the protocol and the router's client are the replica's outside",
	},
	{
		from:  []string{"budget", "catalog", "placement", "filter", "filter/...", "fusion", "vector", "vector/...", "admission"},
		never: []string{"api", "api/...", "coordinator", "fanout", "shard", "shard/...", "internal/app", "internal/devcluster", "cmd/..."},
		why:   "pure rules and leaves import none of the layers that use them",
	},
	{
		from:  []string{"...", "!cmd/...", "!internal/app", "!internal/devcluster", "!internal/apitest", "!bench/..."},
		never: []string{"internal/app", "internal/devcluster", "cmd/..."},
		why:   "only the wiring, the commands and their test support sit at the top",
	},
}

// match reports whether pkg (a full import path) is named by pattern: a
// module-relative path, a path ending in /... for it and everything under
// it, "..." for every module package, or a full path outside the module.
func match(pattern, pkg string) bool {
	if pattern == "..." {
		return strings.HasPrefix(pkg, mod+"/")
	}
	full := pattern
	if !strings.Contains(strings.SplitN(pattern, "/", 2)[0], ".") {
		full = mod + "/" + pattern
	}
	if base, ok := strings.CutSuffix(full, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == full || (strings.Contains(pattern, ".") && strings.HasPrefix(pkg, full+"/"))
}

func matchesFrom(patterns []string, pkg string) bool {
	in := false
	for _, p := range patterns {
		if neg, ok := strings.CutPrefix(p, "!"); ok {
			if match(neg, pkg) {
				return false
			}
			continue
		}
		in = in || match(p, pkg)
	}
	return in
}

// pkgDeps is a package's own imports and its transitive dependencies.
type pkgDeps struct{ imports, deps []string }

// deps lists every non-test package of the module with its imports and
// its transitive dependencies.
func deps(t *testing.T) map[string]pkgDeps {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`+"\t"+`{{join .Imports " "}}`, mod+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	m := map[string]pkgDeps{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		all, own, _ := strings.Cut(sc.Text(), "\t")
		f := strings.Fields(all)
		if len(f) > 0 {
			m[f[0]] = pkgDeps{imports: strings.Fields(own), deps: f[1:]}
		}
	}
	require.NoError(t, sc.Err())
	return m
}

// TestImportsFlowOneWay fails when an import runs against DESIGN.md's
// Layout.
func TestImportsFlowOneWay(t *testing.T) {
	all := deps(t)
	require.Contains(t, all, mod+"/coordinator", "go list found the module's packages")
	for _, r := range rules {
		for pkg, pd := range all {
			if !matchesFrom(r.from, pkg) {
				continue
			}
			ds := pd.deps
			if r.direct {
				ds = pd.imports
			}
			for _, d := range ds {
				for _, n := range r.never {
					if match(n, d) {
						t.Errorf("%s depends on %s: %s (DESIGN.md, Layout)", pkg, d, r.why)
					}
				}
			}
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"shard", mod + "/shard", true},
		{"shard", mod + "/shard/store", false},
		{"shard/...", mod + "/shard/store", true},
		{"shard/...", mod + "/shard", true},
		{"shard/...", mod + "/shardx", false},
		{"...", mod + "/api", true},
		{"google.golang.org/grpc", "google.golang.org/grpc/codes", true},
		{"google.golang.org/grpc", "google.golang.org/grpcx", false},
		{"github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb/v2", false},
	} {
		require.Equal(t, tc.want, match(tc.pattern, tc.pkg), "%s ~ %s", tc.pattern, tc.pkg)
	}
}
