package qdrantx

import (
	"fmt"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/filter"
)

// Payload indexes: the shards index every payload key whatever is
// declared, so a declaration is recorded (a collection's description
// shows it in its payload schema) and changes no answer, but for uuid
// and text: as Qdrant's uuid index, a uuid one makes match conditions on
// the key compare UUIDs (coordinator.Collection.UUIDKeys); as Qdrant's
// full-text index, a text one makes match.text and match.text_any match
// tokens (coordinator.Collection.TextIndexes), the shards keeping token
// postings for it.

// payloadTypes are the payload schema types a declaration may name: those
// whose Qdrant index matches as trawl's filters do.
var payloadTypes = map[string]bool{
	"keyword": true, "integer": true, "float": true, "bool": true, "datetime": true, "geo": true, "uuid": true, "text": true,
}

// CheckField checks a payload index's field name: a key a filter can name.
func CheckField(field string) error {
	if field == "" {
		return wire.Invalid("field_name is missing")
	}
	if _, err := HasValue(field); err != nil {
		return wire.Invalid(fmt.Sprintf("field_name %q is not a payload key: a key is a dotted path like meta.draft", field))
	}
	return nil
}

// CheckFieldSchema checks a payload index's declared type (Qdrant's
// names: keyword, integer, ...).
func CheckFieldSchema(schema string) error {
	if !payloadTypes[schema] {
		return wire.Invalid(fmt.Sprintf("field_schema %q is not a payload schema type: want keyword, integer, float, bool, datetime, geo, uuid or text", schema))
	}
	return nil
}

// TextSchema is the declaration of a text index with Qdrant's
// TextIndexParams JSON params (nil: the defaults), as the catalog records
// it (filter.TextIndex.Schema); a tokenizer or option trawl does not
// follow is a 400 naming it.
func TextSchema(params []byte) (string, error) {
	if params == nil {
		return filter.DefaultTextIndex().Schema(), nil
	}
	t, err := filter.ParseTextIndex(params)
	if err != nil {
		return "", wire.Invalid(err.Error())
	}
	return t.Schema(), nil
}

// TextParams is a text index declaration's params as Qdrant's
// TextIndexParams JSON shows them, nil for a declaration of another type.
func TextParams(schema string) map[string]any {
	t, ok := filter.TextIndexOf(schema)
	if !ok {
		return nil
	}
	out := map[string]any{"type": filter.SchemaText, "tokenizer": t.Tokenizer, "lowercase": t.Lowercase}
	if t.MinTokenLen > 0 {
		out["min_token_len"] = t.MinTokenLen
	}
	if t.MaxTokenLen > 0 {
		out["max_token_len"] = t.MaxTokenLen
	}
	return out
}
