package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// routerFlag is every value of one flag in the router's args.
func routerFlag(t *testing.T, objs []object, name string) []string {
	t.Helper()
	var out []string
	for _, a := range ofKind[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// valuesFile writes values to a file for helm --values.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCollectionsValues: every entry of `collections` reaches the router as
// one --ensure-collection with every setting written out
// (NAME=DIM:METRIC:QUANTIZATION:INDEX, the form catalog.ParseSpec reads and
// Settings.String writes), the API's defaults filling what an entry leaves
// out; router.maxCollections is --max-collections; no collections, no flag.
func TestCollectionsValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		want   []string
		max    string
	}{
		{"default", "", []string{"trawl=1536:cosine:none:flat"}, "1000"},
		{"ci file", "@collections", []string{
			"trawl=1536:cosine:none:flat",
			"products.v2=768:dot:int8:flat",
			"images=512:l2:int8:ivf",
			"tiny_test-1=3:cosine:none:flat",
		}, "50"},
		{"ivf with quantization none is int8", "collections: [{name: a, dimension: 8, index: ivf, quantization: none}]",
			[]string{"a=8:cosine:int8:ivf"}, "1000"},
		{"none", "collections: []", nil, "1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files []string
			switch {
			case tc.values == "@collections":
				files = []string{filepath.Join(chartDir(t), "ci", "collections-values.yaml")}
			case tc.values != "":
				files = []string{valuesFile(t, tc.values)}
			}
			objs := decodeAll(t, render(t, files))
			if got := routerFlag(t, objs, "--ensure-collection"); !slices.Equal(got, tc.want) {
				t.Errorf("--ensure-collection %v, want %v", got, tc.want)
			}
			if m := routerFlag(t, objs, "--max-collections"); !slices.Equal(m, []string{tc.max}) {
				t.Errorf("--max-collections %v, want %s", m, tc.max)
			}
			checkInvariants(t, objs)
		})
	}
}

// TestBadCollectionsFail: collections the router would refuse fail at
// install, with a message.
func TestBadCollectionsFail(t *testing.T) {
	cases := map[string]string{
		"no dimension":           "collections: [{name: a}]",
		"no name":                "collections: [{dimension: 3}]",
		"bad name":               "collections: [{name: a/b, dimension: 3}]",
		"long name":              "collections: [{name: " + strings.Repeat("x", 65) + ", dimension: 3}]",
		"zero dimension":         "collections: [{name: a, dimension: 0}]",
		"too large dimension":    "collections: [{name: a, dimension: 8193}]",
		"unknown metric":         "collections: [{name: a, dimension: 3, metric: hamming}]",
		"unknown quantization":   "collections: [{name: a, dimension: 3, quantization: int4}]",
		"unknown index":          "collections: [{name: a, dimension: 3, index: hnsw}]",
		"misspelt setting":       "collections: [{name: a, dim: 3}]",
		"twice":                  "collections: [{name: a, dimension: 3}, {name: a, dimension: 4}]",
		"more than the max":      "router: {maxCollections: 1}\ncollections: [{name: a, dimension: 3}, {name: b, dimension: 4}]",
		"zero max":               "router: {maxCollections: 0}",
		"legacy dim past 8192":   "shards: {dim: 9000}",
		"string max collections": "router: {maxCollections: many}",
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", releaseName, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion,
				"--values", valuesFile(t, values)}
			if out, err := tool(t, "helm", args...).CombinedOutput(); err == nil {
				t.Errorf("helm template with %q succeeded; want a failure", values)
			} else if !strings.Contains(string(out), "Error") {
				t.Errorf("no error message: %s", out)
			}
		})
	}
}
