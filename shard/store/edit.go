package store

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard/store/sparse"
)

// EditKind is what an Edit does.
type EditKind int

// The edits (shardpb.EditKind).
const (
	EditUpsert EditKind = iota + 1
	EditDelete
	EditSetPayload
	EditOverwritePayload
	EditDeletePayload
	EditClearPayload
	EditUpdateVectors
	// EditDeleteVectors removes the named dense and sparse vectors Keys
	// names from the documents IDs and Filter select.
	EditDeleteVectors
)

// Edit is one edit of an ordered list Memory.Edit applies.
type Edit struct {
	Kind EditKind
	// IDs and Filter select the documents a delete or payload edit acts
	// on: every listed id (a payload edit's must be stored) and every
	// document Filter matches (nil: none by filter).
	IDs    []string
	Filter *filter.Filter
	// Records are an upsert's documents, and update_vectors' ids and
	// vectors (their payloads unused).
	Records []Record
	// Payload is set_payload's and overwrite_payload's JSON object.
	Payload []byte
	// Path is set_payload's dotted path (filter.PayloadPath), nil for the
	// top level.
	Path []string
	// Keys are delete_payload's top-level keys, and delete_vectors'
	// vector names.
	Keys []string
}

// MissingError is an edit naming a document the store does not hold at
// that point of the list: nothing of the list was applied.
type MissingError struct {
	ID string
	// Edit is the edit's position in the list.
	Edit int
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("edit %d: no point with id %s", e.Edit, e.ID)
}

// EditError is an edit that cannot apply for another reason (a payload it
// leaves is over the limits): nothing of the list was applied.
type EditError struct {
	Edit int
	ID   string
	Err  error
}

func (e *EditError) Error() string {
	return fmt.Sprintf("edit %d, point %s: %v", e.Edit, e.ID, e.Err)
}

func (e *EditError) Unwrap() error { return e.Err }

// pendingDoc is a document as the edits so far left it.
type pendingDoc struct {
	exists  bool
	vec     []float32 // nil: the stored row's (unchanged)
	payload []byte
	// payloadSet: payload replaces the stored one.
	payloadSet bool
	// sparse are sparse vectors to set: all of them (sparseAll, an
	// upsert: names absent go) or only those named (an update of some
	// vectors).
	sparse    map[string]sparse.Vector
	sparseAll bool
	// named are named dense vectors to set, as sparse (sparseAll says
	// all of them for both).
	named map[string][]float32
	// dropNamed are named vectors to remove (delete_vectors).
	dropNamed map[string]bool
}

// editPlan is the state the edits of a list leave, computed before any of
// it is applied: the documents they touch, in the order first touched.
type editPlan struct {
	m     *Memory
	docs  map[string]*pendingDoc
	order []string
}

// doc is id's state at this point of the list. m.mu must be held.
func (p *editPlan) doc(id string) *pendingDoc {
	if d, ok := p.docs[id]; ok {
		return d
	}
	d := &pendingDoc{}
	if i, ok := p.m.index[id]; ok {
		d.exists, d.payload = true, p.m.payloads[i]
	}
	p.docs[id] = d
	p.order = append(p.order, id)
	return d
}

// matching are the ids of the documents f matches at this point of the
// list: stored ones the list has not touched, from the payload index, then
// touched ones that still exist, by their pending payload.
func (p *editPlan) matching(f *filter.Filter) []string {
	m := p.m
	rows := m.selectRows(f) // has_id included
	var out []string
	for _, r := range rows.ToArray() {
		if _, touched := p.docs[m.ids[r]]; !touched {
			out = append(out, m.ids[r])
		}
	}
	for _, id := range p.order {
		if d := p.docs[id]; d.exists && f.MatchPoint(id, decodePayload(d.payload)) {
			out = append(out, id)
		}
	}
	return out
}

// Edit applies edits in order, atomically: either every edit applies or,
// with a *MissingError or *EditError, none does. A filter is evaluated
// under the write lock against the state the edits before it left, so
// every replica applying the same log entry changes the same documents
// the same way.
func (m *Memory) Edit(_ context.Context, p Placement, edits []Edit) error {
	m.lockWrite()
	defer m.mu.Unlock()
	plan := &editPlan{m: m, docs: map[string]*pendingDoc{}}
	for i, e := range edits {
		if err := plan.add(i, e); err != nil {
			return err
		}
	}
	m.setPlacement(p)
	defer m.payloadIndex.Flush()
	plan.apply()
	return nil
}

// add plans edit i.
func (p *editPlan) add(i int, e Edit) error {
	if e.Kind < EditUpsert || e.Kind > EditDeleteVectors {
		return &EditError{Edit: i, Err: fmt.Errorf("unknown edit kind %d", e.Kind)}
	}
	switch e.Kind {
	case EditUpsert:
		for _, r := range e.Records {
			*p.doc(r.ID) = pendingDoc{exists: true, vec: r.Vector, payload: r.Payload, payloadSet: true, sparse: maps.Clone(r.Sparse), sparseAll: true,
				named: maps.Clone(r.Named)}
		}
		return nil
	case EditUpdateVectors:
		for _, r := range e.Records {
			d := p.doc(r.ID)
			if !d.exists {
				return &MissingError{ID: r.ID, Edit: i}
			}
			if r.Vector != nil {
				d.vec = r.Vector
			}
			for name, v := range r.Sparse {
				if d.sparse == nil {
					d.sparse = map[string]sparse.Vector{}
				}
				d.sparse[name] = v
			}
			for name, v := range r.Named {
				if d.named == nil {
					d.named = map[string][]float32{}
				}
				d.named[name] = v
				delete(d.dropNamed, name)
			}
		}
		return nil
	}
	ids := slices.Clone(e.IDs)
	for _, id := range ids {
		if e.Kind != EditDelete && !p.doc(id).exists {
			return &MissingError{ID: id, Edit: i}
		}
	}
	if !e.Filter.Empty() {
		ids = append(ids, p.matching(e.Filter)...)
	}
	for _, id := range ids {
		d := p.doc(id)
		if !d.exists {
			continue // a delete of an absent id, or an id listed twice
		}
		var (
			pl  []byte
			err error
		)
		switch e.Kind {
		case EditDelete:
			*d = pendingDoc{}
			continue
		case EditSetPayload:
			pl, err = setPayload(d.payload, e.Payload, e.Path)
		case EditOverwritePayload:
			pl, err = overwritePayload(e.Payload)
		case EditDeletePayload:
			pl, err = deletePayloadKeys(d.payload, e.Keys)
		case EditClearPayload:
		case EditDeleteVectors:
			d.dropVectors(p.m, e.Keys)
			continue
		}
		if err != nil {
			return &EditError{Edit: i, ID: id, Err: err}
		}
		d.payload, d.payloadSet = pl, true
	}
	return nil
}

// apply writes the plan, in the order the documents were first touched.
// m.mu must be held for writing; the caller flushes the payload index.
func (p *editPlan) apply() {
	m := p.m
	for _, id := range p.order {
		d := p.docs[id]
		i, stored := m.index[id]
		switch {
		case !d.exists && stored:
			m.deleteLocked(id)
		case !d.exists:
		case !stored:
			m.appendLocked(Record{ID: id, Vector: d.vec, Payload: d.payload, Sparse: d.sparse, Named: d.named}, nil)
		default:
			if d.vec != nil {
				m.setVectorLocked(i, d.vec, nil)
			}
			if d.payloadSet {
				m.setPayloadLocked(i, d.payload)
			}
			if d.sparseAll {
				m.setSparseLocked(i, d.sparse)
			} else {
				m.updateSparseLocked(i, d.sparse)
			}
			m.setNamedLocked(i, d.named, d.sparseAll)
			m.dropNamedLocked(i, d.dropNamed)
		}
	}
}
