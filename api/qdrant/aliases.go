package qdrant

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
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

// decodeAliases reads a ChangeAliasesOperation, checking every action
// before any is applied.
func decodeAliases(b []byte) ([]qdrantx.AliasChange, error) {
	var req struct {
		Actions []json.RawMessage `json:"actions"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return nil, err
	}
	if req.Actions == nil {
		return nil, wire.Invalid("actions is missing")
	}
	out := make([]qdrantx.AliasChange, len(req.Actions))
	for i, raw := range req.Actions {
		c, err := decodeAliasAction(raw)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("actions[%d]: %v", i, err))
		}
		out[i] = c
	}
	return out, nil
}

func decodeAliasAction(raw json.RawMessage) (qdrantx.AliasChange, error) {
	var a aliasAction
	if err := wire.DecodeStrict(raw, &a); err != nil {
		return qdrantx.AliasChange{}, err
	}
	set := 0
	for _, p := range []bool{a.Create != nil, a.Delete != nil, a.Rename != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return qdrantx.AliasChange{}, wire.Invalid("want exactly one of create_alias, delete_alias or rename_alias")
	}
	name := func(what string, v *string) (string, error) {
		if v == nil || *v == "" {
			return "", wire.Invalid(what + " is missing")
		}
		return *v, nil
	}
	var c qdrantx.AliasChange
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
		for _, name := range c.Names() {
			if err := h.http.Permit(r, name, apikey.Write); err != nil {
				h.http.Fail(w, r, err, nil)
				return
			}
		}
	}
	if err := qdrantx.ApplyAliases(r.Context(), h.cfg.Coordinator, changes); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, true, nil)
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
	aliases, err := qdrantx.ListAliases(r.Context(), h.cfg.Coordinator, of, func(name string) bool { return h.http.Readable(r, name) })
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	out := make([]aliasDescription, len(aliases))
	for i, a := range aliases {
		out[i] = aliasDescription{AliasName: a.Alias, CollectionName: a.Collection}
	}
	answer(w, r, map[string][]aliasDescription{"aliases": out}, nil)
}
