package qdrant

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

// aliasAction is one of Qdrant's AliasOperations: exactly one member set.
type aliasAction struct {
	Create *struct {
		CollectionName *string `json:"collection_name"`
		AliasName      *string `json:"alias_name"`
	} `json:"create_alias"`
	Delete *struct {
		AliasName *string `json:"alias_name"`
	} `json:"delete_alias"`
	Rename *struct {
		OldAliasName *string `json:"old_alias_name"`
		NewAliasName *string `json:"new_alias_name"`
	} `json:"rename_alias"`
}

// aliasChange is a decoded action: Collection set is a create (or the
// target of a rename), Old set a rename, neither a delete.
type aliasChange struct {
	Alias      string
	Collection string
	Old        string
}

// decodeAliases reads a ChangeAliasesOperation, checking every action
// before any is applied.
func decodeAliases(b []byte) ([]aliasChange, error) {
	var req struct {
		Actions []json.RawMessage `json:"actions"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, err
	}
	if req.Actions == nil {
		return nil, wire.Invalid("actions is missing")
	}
	out := make([]aliasChange, len(req.Actions))
	for i, raw := range req.Actions {
		c, err := decodeAliasAction(raw)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("actions[%d]: %v", i, err))
		}
		out[i] = c
	}
	return out, nil
}

func decodeAliasAction(raw json.RawMessage) (aliasChange, error) {
	var a aliasAction
	if err := wire.DecodeStrict(raw, &a); err != nil {
		return aliasChange{}, err
	}
	set := 0
	for _, p := range []bool{a.Create != nil, a.Delete != nil, a.Rename != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return aliasChange{}, wire.Invalid("want exactly one of create_alias, delete_alias or rename_alias")
	}
	name := func(what string, v *string) (string, error) {
		if v == nil || *v == "" {
			return "", wire.Invalid(what + " is missing")
		}
		return *v, nil
	}
	var c aliasChange
	var err error
	switch {
	case a.Create != nil:
		if c.Alias, err = name("create_alias.alias_name", a.Create.AliasName); err == nil {
			c.Collection, err = name("create_alias.collection_name", a.Create.CollectionName)
		}
	case a.Delete != nil:
		c.Alias, err = name("delete_alias.alias_name", a.Delete.AliasName)
	default:
		if c.Old, err = name("rename_alias.old_alias_name", a.Rename.OldAliasName); err == nil {
			c.Alias, err = name("rename_alias.new_alias_name", a.Rename.NewAliasName)
		}
	}
	return c, err
}

// updateAliases is POST /collections/aliases: the actions in order. Each
// is committed through the catalog on its own: unlike Qdrant's, the list
// is not atomic, and an action that fails leaves those before it done
// (every action is checked before the first is applied). A rename points
// the new alias at the old one's collection before it deletes the old,
// so one of the two names resolves at every moment.
func (h *Handler) updateAliases(w http.ResponseWriter, r *http.Request) {
	changes, _, ok := decodeRequest(h, w, r, decodeAliases)
	if !ok {
		return
	}
	// An alias change writes both names: the key must grant write on
	// each, for every action, before the first is applied.
	for _, c := range changes {
		for _, name := range []string{c.Alias, c.Collection, c.Old} {
			if name == "" {
				continue
			}
			if err := h.http.Permit(r, name, apikey.Write); err != nil {
				h.http.Fail(w, r, err, nil)
				return
			}
		}
	}
	co := h.cfg.Coordinator
	for _, c := range changes {
		var err error
		switch {
		case c.Old != "":
			err = h.renameAlias(r, c.Old, c.Alias)
		case c.Collection != "":
			err = co.SetAlias(r.Context(), c.Alias, c.Collection)
			if coordinator.CodeOf(err) == coordinator.CodeCollectionNotFound {
				err = notFoundCollection(c.Collection)
			} else if coordinator.CodeOf(err) == coordinator.CodeConflict {
				err = &wire.Error{Status: http.StatusConflict, Code: wire.CodeConflict, Msg: fmt.Sprintf("Collection `%s` already exists!", c.Alias)}
			}
		default:
			err = co.DeleteAlias(r.Context(), c.Alias)
		}
		if err != nil {
			h.http.Fail(w, r, err, nil)
			return
		}
	}
	answer(w, r, true, nil)
}

// renameAlias moves alias from to the name to.
func (h *Handler) renameAlias(r *http.Request, from, to string) error {
	aliases, err := h.cfg.Coordinator.Aliases(r.Context())
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
	if err := h.cfg.Coordinator.SetAlias(r.Context(), to, target); err != nil {
		return err
	}
	return h.cfg.Coordinator.DeleteAlias(r.Context(), from)
}

type aliasDescription struct {
	AliasName      string `json:"alias_name"`
	CollectionName string `json:"collection_name"`
}

// listAliases is GET /aliases, and GET /collections/{name}/aliases (those
// of one collection: none for a name that is no collection). An alias
// whose collection was dropped through another route is not listed: it
// resolves to nothing.
func (h *Handler) listAliases(w http.ResponseWriter, r *http.Request) {
	of := chi.URLParam(r, "collection")
	aliases, err := h.cfg.Coordinator.Aliases(r.Context())
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	colls, err := h.cfg.Coordinator.Collections(r.Context())
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	exists := make(map[string]bool, len(colls))
	for _, c := range colls {
		exists[c.Name] = true
	}
	out := []aliasDescription{}
	for _, a := range aliases {
		if exists[a.Collection] && (of == "" || a.Collection == of) && h.http.Readable(r, a.Collection) && h.http.Readable(r, a.Alias) {
			out = append(out, aliasDescription{AliasName: a.Alias, CollectionName: a.Collection})
		}
	}
	answer(w, r, map[string][]aliasDescription{"aliases": out}, nil)
}
