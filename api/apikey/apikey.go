// Package apikey reads `router serve --api-key-file` into a Keyring: the
// API keys the router accepts and, for each, the collections it may read
// or write (DESIGN.md, "Collections", scoped keys). Package api's request
// handling (api/internal/httpx) looks a request's key up in it and checks
// the collection the request acts on against the key's Scope.
//
// It holds rules only: no HTTP, and never a key in an error or a log line.
package apikey

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/trawl-search/trawl/catalog"
)

// Access is what a key may do on a collection. Write implies Read.
type Access uint8

// The accesses, weakest first.
const (
	Read Access = iota + 1
	Write
)

func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("Access(%d)", uint8(a))
}

// All is the pattern that covers every collection.
const All = "*"

// Scope is what one key may touch: collections matching any of its
// patterns (names, or path.Match globs), with its access.
type Scope struct {
	patterns []string
	access   Access
}

// Everything is a bare key's scope: every collection, read and write.
func Everything() Scope { return Scope{patterns: []string{All}, access: Write} }

// Allows reports whether the scope grants need on collection.
func (s Scope) Allows(collection string, need Access) bool {
	if s.access < need {
		return false
	}
	for _, p := range s.patterns {
		// Patterns were checked at parse time, so Match cannot fail.
		if ok, _ := path.Match(p, collection); ok {
			return true
		}
	}
	return false
}

// Global reports whether the scope names every collection (`*`): what
// the operator endpoints, which see the whole cluster, ask for.
func (s Scope) Global() bool {
	for _, p := range s.patterns {
		if p == All {
			return true
		}
	}
	return false
}

// entry is one key of a keyring. Only its SHA-256 is kept: a lookup then
// compares fixed-length digests, so its timing says nothing about the
// keys' lengths or contents.
type entry struct {
	sum   [sha256.Size]byte
	scope Scope
}

// Keyring is the keys a router accepts. A nil *Keyring accepts no key;
// callers treat it as "no key file: the API is open".
type Keyring struct {
	entries []entry
}

// Lookup finds the scope of a presented key. It compares the key with
// every entry, in constant time each, whether or not one matched.
func (k *Keyring) Lookup(key string) (Scope, bool) {
	if k == nil || key == "" {
		return Scope{}, false
	}
	sum := sha256.Sum256([]byte(key))
	var (
		found Scope
		ok    bool
	)
	for _, e := range k.entries {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			found, ok = e.scope, true
		}
	}
	return found, ok
}

// Len is the number of keys.
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	return len(k.entries)
}

// Single is a keyring of one bare key (every collection, read and write).
func Single(key string) *Keyring {
	return &Keyring{entries: []entry{{sum: sha256.Sum256([]byte(key)), scope: Everything()}}}
}

// ErrSyntax wraps every error Parse returns about the file's content.
var ErrSyntax = errors.New("bad API key file")

// Parse reads a key file: one key a line, blank lines and lines starting
// with # ignored. A line is a bare key (every collection, read and
// write), or
//
//	KEY COLLECTIONS [read|write]
//
// where COLLECTIONS is a comma-separated list of collection names or
// path.Match globs (`*` for all), and the access defaults to write (which
// implies read). Fields are separated by white space, so a key holds
// none, and a key cannot start with #. An error names the line (never the
// key); a file without a key is an error, and so is a key given twice.
func Parse(r io.Reader) (*Keyring, error) {
	k := &Keyring{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, n, err)
		}
		if first, dup := seen[e.sum]; dup {
			return nil, fmt.Errorf("%w: line %d: the key of line %d again; give each key one line", ErrSyntax, n, first)
		}
		seen[e.sum] = n
		k.entries = append(k.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(k.entries) == 0 {
		return nil, fmt.Errorf("%w: no key in it", ErrSyntax)
	}
	return k, nil
}

func parseLine(line string) (entry, error) {
	f := strings.Fields(line)
	if len(f) > 3 {
		return entry{}, fmt.Errorf("%d fields, want KEY [COLLECTIONS [read|write]]", len(f))
	}
	e := entry{sum: sha256.Sum256([]byte(f[0])), scope: Everything()}
	if len(f) == 1 {
		return e, nil
	}
	e.scope.patterns = nil
	for _, p := range strings.Split(f[1], ",") {
		if err := checkPattern(p); err != nil {
			return entry{}, err
		}
		e.scope.patterns = append(e.scope.patterns, p)
	}
	if len(f) == 3 {
		switch f[2] {
		case "read":
			e.scope.access = Read
		case "write":
			e.scope.access = Write
		default:
			return entry{}, fmt.Errorf("access %q, want read or write", f[2])
		}
	}
	return e, nil
}

// checkPattern accepts a collection name, or a glob whose literal parts
// could be part of one.
func checkPattern(p string) error {
	if p == "" {
		return errors.New("an empty collection in the list (a stray comma?)")
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("collection pattern %q: %v", p, err)
	}
	if !strings.ContainsAny(p, `*?[\`) {
		if err := catalog.ValidName(p); err != nil {
			return fmt.Errorf("collection pattern: %v", err)
		}
	}
	return nil
}

// ReadFile parses the key file at name (Parse); errors name the file.
func ReadFile(name string) (*Keyring, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	k, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return k, nil
}
