package longtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFind(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	write("a/a_test.go", `package a

import (
	"testing"

	"github.com/trawl-search/trawl/internal/longtest"
)

func TestDirect(t *testing.T) { longtest.Mark(t) }

func TestInASubtest(t *testing.T) {
	t.Run("x", func(t *testing.T) { longtest.Mark(t) })
}

func TestQuick(t *testing.T) {}

func helper(t *testing.T) { longtest.Mark(t) }

func TestMain(m *testing.M) { longtest.Mark(nil) }
`)
	write("b/c/c_test.go", `package c

import (
	"testing"

	lt "github.com/trawl-search/trawl/internal/longtest"
)

func TestRenamedImport(t *testing.T) { lt.Mark(t) }
`)
	// A Mark of another package, a file that is not a test, and the
	// places the go command ignores are not looked at.
	write("d/d_test.go", `package d

import "testing"

type longtest struct{}

func (longtest) Mark(*testing.T) {}

func TestOtherMark(t *testing.T) { longtest{}.Mark(t) }
`)
	write("a/a.go", "package a\n\nfunc TestNotATestFile() { longtest.Mark(nil) }\n")
	for _, dir := range []string{"testdata", ".hidden", "_old", "othermod"} {
		write(dir+"/x_test.go", "package x\n\nimport (\"testing\"; \"github.com/trawl-search/trawl/internal/longtest\")\n\nfunc TestHidden(t *testing.T) { longtest.Mark(t) }\n")
	}
	write("othermod/go.mod", "module othermod\n")

	got, err := Find(root)
	require.NoError(t, err)
	require.Equal(t, []Test{
		{Dir: "a", Name: "TestDirect"},
		{Dir: "a", Name: "TestInASubtest"},
		{Dir: "b/c", Name: "TestRenamedImport"},
	}, got)
	require.Equal(t, []string{"-run=^(TestDirect|TestInASubtest|TestRenamedImport)$", "./a", "./b/c"}, Args(got))
}

func TestFindReportsAFileThatDoesNotParse(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "x_test.go"), []byte("package x\nfunc {"), 0o644))
	_, err := Find(root)
	require.Error(t, err)
}

// TestMarkSkipsOnlyUnderShort: a marked test goes on past Mark unless
// -short is set.
func TestMarkSkipsOnlyUnderShort(t *testing.T) {
	past := false
	t.Run("marked", func(t *testing.T) {
		Mark(t)
		past = true
	})
	require.Equal(t, !testing.Short(), past)
}
