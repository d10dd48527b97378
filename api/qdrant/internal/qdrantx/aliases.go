package qdrantx

import (
	"context"
	"fmt"
	"net/http"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

// AliasChange is one decoded alias action: Collection set is a create
// (or a move), Old set a rename of Old to Alias, neither a delete.
type AliasChange struct {
	Alias      string
	Collection string
	Old        string
}

// Names are the names a change writes, for the key's scope.
func (c AliasChange) Names() []string {
	var out []string
	for _, n := range []string{c.Alias, c.Collection, c.Old} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ApplyAliases applies the changes in order. Each is committed through
// the catalog on its own: unlike Qdrant's, the list is not atomic, and an
// action that fails leaves those before it done (the caller checks every
// action before the first is applied). A rename points the new alias at
// the old one's collection before it deletes the old, so one of the two
// names resolves at every moment.
func ApplyAliases(ctx context.Context, co *coordinator.Coordinator, changes []AliasChange) error {
	for _, c := range changes {
		var err error
		switch {
		case c.Old != "":
			err = renameAlias(ctx, co, c.Old, c.Alias)
		case c.Collection != "":
			err = co.SetAlias(ctx, c.Alias, c.Collection)
			if coordinator.CodeOf(err) == coordinator.CodeCollectionNotFound {
				err = NotFoundCollection(c.Collection)
			} else if coordinator.CodeOf(err) == coordinator.CodeConflict {
				err = &wire.Error{Status: http.StatusConflict, Code: wire.CodeCatalogConflict, Msg: fmt.Sprintf("Collection `%s` already exists!", c.Alias)}
			}
		default:
			err = co.DeleteAlias(ctx, c.Alias)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// renameAlias moves alias from to the name to.
func renameAlias(ctx context.Context, co *coordinator.Coordinator, from, to string) error {
	aliases, err := co.Aliases(ctx)
	if err != nil {
		return err
	}
	target := ""
	for _, a := range aliases {
		if a.Alias == from {
			target = a.Collection
		}
	}
	if target == "" {
		return &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: fmt.Sprintf("Alias %s does not exists!", from)}
	}
	if err := co.SetAlias(ctx, to, target); err != nil {
		return err
	}
	return co.DeleteAlias(ctx, from)
}

// Alias is one alias as a listing gives it.
type Alias struct {
	Alias, Collection string
}

// ListAliases lists the aliases (of one collection when of is not empty)
// whose collection exists and that readable allows: an alias whose
// collection was dropped through another route resolves to nothing and is
// not listed.
func ListAliases(ctx context.Context, co *coordinator.Coordinator, of string, readable func(string) bool) ([]Alias, error) {
	aliases, err := co.Aliases(ctx)
	if err != nil {
		return nil, err
	}
	colls, err := co.Collections(ctx)
	if err != nil {
		return nil, err
	}
	exists := make(map[string]bool, len(colls))
	for _, c := range colls {
		exists[c.Name] = true
	}
	out := []Alias{}
	for _, a := range aliases {
		if exists[a.Collection] && (of == "" || a.Collection == of) && readable(a.Collection) && readable(a.Alias) {
			out = append(out, Alias{Alias: a.Alias, Collection: a.Collection})
		}
	}
	return out, nil
}
