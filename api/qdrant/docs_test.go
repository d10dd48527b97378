package qdrant_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	_ "github.com/trawl-search/trawl/api/qdrant/qdrantpb" // registers the vendored Qdrant protos
	"github.com/trawl-search/trawl/internal/apitest"
)

// docsPage is the page that lists every Qdrant route and call.
const docsPage = "../../docs/qdrant.md"

// docRow is one row of docs/qdrant.md's "Every Qdrant route and call"
// tables: served, or refused with the answer it gets.
type docRow struct {
	served bool
	answer string // refused: the REST status or the gRPC code name
}

var (
	restRowRE = regexp.MustCompile("^\\| `(GET|PUT|POST|PATCH|DELETE) (/[^`]*)` \\| (served|refused, (\\d{3}))\\b")
	grpcRowRE = regexp.MustCompile("^\\| `(qdrant\\.[A-Za-z]+/[A-Za-z]+)` \\| (served|refused, ([A-Za-z]+))\\b")
)

// readDocRows reads the tables' rows by operation ("GET /collections",
// "qdrant.Points/Search").
func readDocRows(t *testing.T) (rest, rpc map[string]docRow) {
	t.Helper()
	f, err := os.Open(docsPage)
	require.NoError(t, err)
	defer f.Close()
	rest, rpc = map[string]docRow{}, map[string]docRow{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := restRowRE.FindStringSubmatch(sc.Text()); m != nil {
			op := m[1] + " " + m[2]
			require.NotContains(t, rest, op, "%s listed twice", op)
			rest[op] = docRow{served: m[3] == "served", answer: m[4]}
		}
		if m := grpcRowRE.FindStringSubmatch(sc.Text()); m != nil {
			require.NotContains(t, rpc, m[1], "%s listed twice", m[1])
			rpc[m[1]] = docRow{served: m[2] == "served", answer: m[3]}
		}
	}
	require.NoError(t, sc.Err())
	return rest, rpc
}

// schemaOperations is every REST operation of the pinned JS client's
// OpenAPI schema (testdata, vendored by hack/qdrant-rest-ops.mjs): "METHOD
// /path" with the schema's parameter names.
func schemaOperations(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/qdrant-rest-operations.txt")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		require.Len(t, f, 3, "line %q", line)
		out = append(out, f[0]+" "+f[1])
	}
	require.NotEmpty(t, out)
	return out
}

// qdrantRPCs is every RPC of the vendored Qdrant gRPC services, as
// "qdrant.Service/Method", with its descriptor.
func qdrantRPCs(t *testing.T) map[string]protoreflect.MethodDescriptor {
	t.Helper()
	out := map[string]protoreflect.MethodDescriptor{}
	protoregistry.GlobalFiles.RangeFilesByPackage("qdrant", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				out[string(sd.FullName())+"/"+string(md.Name())] = md
			}
		}
		return true
	})
	require.NotEmpty(t, out)
	return out
}

// fillPath names a concrete resource for each of the schema's path
// parameters.
func fillPath(path, collection string) string {
	return strings.NewReplacer("{collection_name}", collection, "{id}", "1", "{field_name}", "f", "{vector_name}", "v",
		"{snapshot_name}", "s", "{shard_id}", "0", "{peer_id}", "1").Replace(path)
}

// TestQdrantDocsListEveryRouteAndCall: docs/qdrant.md names every REST
// operation of the pinned Qdrant client's schema and every RPC of the
// vendored Qdrant protos, each served or refused, and no other; a route
// or call it says is served is routed (answers neither "no such
// endpoint" nor 405, nor gRPC's "not served"), and one it says is refused
// answers what it says. Requests go to a collection that does not exist
// (or, for routes refused with 400, to the test collection with a body
// no route accepts), so none changes data.
func TestQdrantDocsListEveryRouteAndCall(t *testing.T) {
	rest, rpc := readDocRows(t)
	ops := schemaOperations(t)
	rpcs := qdrantRPCs(t)
	var missing []string
	for _, op := range ops {
		if _, ok := rest[op]; !ok {
			missing = append(missing, "| `"+op+"` | served / refused, NNN |")
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range rpcs {
			if !yield(n) {
				return
			}
		}
	}) {
		if _, ok := rpc[name]; !ok {
			missing = append(missing, "| `"+name+"` | served / refused, Unimplemented |")
		}
	}
	require.Empty(t, missing, "%s does not list:\n%s", docsPage, strings.Join(missing, "\n"))
	for op := range rest {
		require.Contains(t, ops, op, "%s lists %s, which the client's schema does not have", docsPage, op)
	}
	for name := range rpc {
		require.Contains(t, rpcs, name, "%s lists %s, which the vendored protos do not have", docsPage, name)
	}

	e := apitest.New(t, apitest.Config{})
	for _, op := range ops {
		row := rest[op]
		t.Run(op, func(t *testing.T) {
			method, path, _ := strings.Cut(op, " ")
			coll, body := "absent-drift-check", "{}"
			if !row.served && row.answer == "400" {
				coll, body = "trawl", `{"drift-check": true}`
			}
			res := e.Do(method, fillPath(path, coll), body, map[string]string{"Content-Type": "application/json"})
			unrouted := res.Status == http.StatusMethodNotAllowed ||
				res.Status == http.StatusNotFound && (strings.Contains(string(res.Body), "no such endpoint") || !strings.Contains(string(res.Body), "{"))
			if row.served {
				require.False(t, unrouted, "documented served, answered %d %s", res.Status, res.Body)
				return
			}
			require.Equal(t, row.answer, fmt.Sprint(res.Status), "documented refused with %s: %s", row.answer, res.Body)
			if res.Status == http.StatusNotFound {
				require.True(t, unrouted, "a refused route answers no such endpoint: %s", res.Body)
			}
		})
	}

	cc := e.GRPC()
	for name, md := range rpcs {
		row := rpc[name]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			in, out := dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output())
			if f := md.Input().Fields().ByName("collection_name"); f != nil {
				coll := "absent-drift-check"
				if !row.served && row.answer == codes.InvalidArgument.String() {
					coll = "trawl" // refused whatever it asks, but after the collection is found
				}
				in.Set(f, protoreflect.ValueOfString(coll))
			}
			err := cc.Invoke(ctx, "/"+name, in, out)
			msg := status.Convert(err).Message()
			notServed := status.Code(err) == codes.Unimplemented && (strings.Contains(msg, "is not served") || strings.HasPrefix(msg, "unknown service"))
			if row.served {
				require.False(t, notServed, "documented served: %v", err)
				return
			}
			require.Equal(t, row.answer, status.Code(err).String(), "documented refused with %s: %v", row.answer, err)
			if status.Code(err) == codes.Unimplemented {
				require.True(t, notServed, "%v", err)
			}
		})
	}
}
