package apikey_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/apikey"
)

const keyFile = `
# operators
admin-key
  ops-key   *   read

tenant-a   a,a-*
tenant-b   b-*,shared   read
reader     docs read
`

// TestParse: what each line of a key file grants, over names the patterns
// do and do not cover.
func TestParse(t *testing.T) {
	k, err := apikey.Parse(strings.NewReader(keyFile))
	require.NoError(t, err)
	require.Equal(t, 5, k.Len())
	type grant struct {
		coll  string
		read  bool
		write bool
	}
	for _, tc := range []struct {
		key    string
		global bool
		grants []grant
	}{
		{key: "admin-key", global: true, grants: []grant{{"a", true, true}, {"anything.else", true, true}}},
		{key: "ops-key", global: true, grants: []grant{{"a", true, false}, {"docs", true, false}}},
		{key: "tenant-a", grants: []grant{{"a", true, true}, {"a-1", true, true}, {"ab", false, false}, {"b-1", false, false}}},
		{key: "tenant-b", grants: []grant{{"b-x", true, false}, {"shared", true, false}, {"a", false, false}, {"b", false, false}}},
		{key: "reader", grants: []grant{{"docs", true, false}, {"docs2", false, false}}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			s, ok := k.Lookup(tc.key)
			require.True(t, ok)
			require.Equal(t, tc.global, s.Global())
			for _, g := range tc.grants {
				require.Equal(t, g.read, s.Allows(g.coll, apikey.Read), "read %s", g.coll)
				require.Equal(t, g.write, s.Allows(g.coll, apikey.Write), "write %s", g.coll)
			}
		})
	}
	for _, unknown := range []string{"", "admin", "admin-key ", "ADMIN-KEY", "# operators", "tenant-a a,a-*"} {
		_, ok := k.Lookup(unknown)
		require.False(t, ok, "%q", unknown)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, file, err string }{
		{"empty", "", "no key in it"},
		{"only comments", "# nothing\n\n   \n", "no key in it"},
		{"too many fields", "k a read extra", "line 1: 4 fields, want KEY [COLLECTIONS [read|write]]"},
		{"bad access", "\nk a admin", `line 2: access "admin", want read or write`},
		{"stray comma", "k a,,b", "line 1: an empty collection in the list (a stray comma?)"},
		{"trailing comma", "k a,", "line 1: an empty collection in the list"},
		{"bad glob", "k a[", `line 1: collection pattern "a[": syntax error in pattern`},
		{"bad name", "k a/b", `line 1: collection pattern: invalid collection: name "a/b"`},
		{"name too long", "k " + strings.Repeat("x", 65), "line 1: collection pattern: invalid collection"},
		{"a key twice", "k\nj\nk docs read", "line 3: the key of line 1 again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := apikey.Parse(strings.NewReader(tc.file))
			require.ErrorIs(t, err, apikey.ErrSyntax)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestErrorsNeverNameTheKey: a bad line's error says where and what, but
// never echoes the key (errors reach logs).
func TestErrorsNeverNameTheKey(t *testing.T) {
	for _, line := range []string{"s3cret a b c", "s3cret a admin", "s3cret a/b", "s3cret\ns3cret"} {
		_, err := apikey.Parse(strings.NewReader(line))
		require.Error(t, err)
		require.NotContains(t, err.Error(), "s3cret")
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(good, []byte("s3cret\n"), 0o600))
	k, err := apikey.ReadFile(good)
	require.NoError(t, err)
	s, ok := k.Lookup("s3cret")
	require.True(t, ok)
	require.True(t, s.Global())
	require.True(t, s.Allows("any", apikey.Write))

	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte("k a b c\n"), 0o600))
	_, err = apikey.ReadFile(bad)
	require.ErrorContains(t, err, bad+": bad API key file: line 1:")

	_, err = apikey.ReadFile(filepath.Join(dir, "absent"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestSingleAndNil(t *testing.T) {
	s, ok := apikey.Single("k").Lookup("k")
	require.True(t, ok)
	require.Equal(t, apikey.Everything(), s)
	var none *apikey.Keyring
	_, ok = none.Lookup("k")
	require.False(t, ok)
	require.Zero(t, none.Len())
	require.False(t, apikey.Scope{}.Allows("a", apikey.Read), "the zero scope grants nothing")
}
