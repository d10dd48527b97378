package longtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ImportPath is this package's, as test files import it.
const ImportPath = "github.com/trawl-search/trawl/internal/longtest"

// Mark skips t when the suite runs with -short (`make test`); `make
// test-long` runs it.
func Mark(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("long: `make test-long` runs it")
	}
}

// Test names one top-level test that calls Mark.
type Test struct {
	Dir  string // the package's directory, relative to the root searched
	Name string
}

// Find lists the top-level tests of the test files under root that call
// Mark, anywhere in their body (a subtest's closure included), sorted by
// directory and name. Like the go command, it leaves out directories
// starting with "." or "_", testdata, and other modules (a go.mod).
func Find(root string) ([]Test, error) {
	var found []Test
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module: its own `go test`
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		names, err := marked(path)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, n := range names {
			found = append(found, Test{Dir: filepath.ToSlash(dir), Name: n})
		}
		return nil
	})
	slices.SortFunc(found, func(a, b Test) int {
		if c := strings.Compare(a.Dir, b.Dir); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return found, err
}

// marked returns the names of the Test functions in one file that call
// Mark through this package's import (whatever name it is imported as).
func marked(path string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("longtest: %w", err)
	}
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == ImportPath {
			local = "longtest"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" {
		return nil, nil
	}
	var names []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
			continue
		}
		calls := false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Mark" {
				return !calls
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
				calls = true
			}
			return !calls
		})
		if calls {
			names = append(names, fn.Name.Name)
		}
	}
	return names, nil
}

// Args is the arguments `go test` needs to run exactly the tests listed:
// a -run pattern of their names, then their packages' directories.
func Args(tests []Test) []string {
	var names, dirs []string
	for _, t := range tests {
		names = append(names, t.Name)
		dirs = append(dirs, "./"+t.Dir)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	return append([]string{"-run=^(" + strings.Join(names, "|") + ")$"}, dirs...)
}
