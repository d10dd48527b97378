package coordinator

import (
	"context"
	"maps"
	"sync"
)

// Payload index declarations (Qdrant's PUT /collections/{c}/index). Every
// payload key is indexed by the shards whatever is declared, so a
// declaration changes no answer; it is kept so that a collection's
// description shows what its clients declared.

// payloadIndexes holds the declarations this router has taken, by
// collection incarnation. Its zero value is ready.
//
// TODO(lead): persist in the catalog (CollectionEntry.payload_schema,
// ChangeCatalogRequest.payload_index); until then declarations live in
// this router's memory only: another router does not see them and a
// restart forgets them.
type payloadIndexes struct {
	mu sync.Mutex
	by map[incarnation]map[string]string
}

// incarnation names one incarnation of a collection: a collection dropped
// and created again starts with no declarations.
type incarnation struct {
	name string
	uid  uint64
}

// SetPayloadIndex declares that coll's payload key field holds values of
// schema (Qdrant's payload schema types: keyword, integer, float, bool,
// datetime, text, geo, ...), replacing an earlier declaration of field.
func (c *Coordinator) SetPayloadIndex(ctx context.Context, coll Collection, field, schema string) error {
	if field == "" || schema == "" {
		return errorf(CodeInvalid, nil, "a payload index needs a field name and a schema")
	}
	if err := ctx.Err(); err != nil {
		return errorf(CodeUnavailable, err, "declaring payload index %q: %v", field, err)
	}
	p := &c.pidx
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[incarnation]map[string]string{}
	}
	k := incarnation{coll.Name, coll.UID}
	if p.by[k] == nil {
		p.by[k] = map[string]string{}
	}
	p.by[k][field] = schema
	return nil
}

// DropPayloadIndex removes the declaration of field; removing one never
// made is not an error.
func (c *Coordinator) DropPayloadIndex(ctx context.Context, coll Collection, field string) error {
	if err := ctx.Err(); err != nil {
		return errorf(CodeUnavailable, err, "dropping payload index %q: %v", field, err)
	}
	p := &c.pidx
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.by[incarnation{coll.Name, coll.UID}], field)
	return nil
}

// withPayloadSchema is coll with the declarations made for it added to
// those its catalog entry carries, in a map of its own.
func (c *Coordinator) withPayloadSchema(coll Collection) Collection {
	p := &c.pidx
	p.mu.Lock()
	defer p.mu.Unlock()
	declared := p.by[incarnation{coll.Name, coll.UID}]
	if len(declared) == 0 && coll.PayloadSchema == nil {
		return coll
	}
	merged := make(map[string]string, len(coll.PayloadSchema)+len(declared))
	maps.Copy(merged, coll.PayloadSchema)
	maps.Copy(merged, declared)
	coll.PayloadSchema = merged
	return coll
}
