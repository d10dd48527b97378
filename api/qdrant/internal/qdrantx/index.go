package qdrantx

import (
	"fmt"

	"github.com/trawl-search/trawl/api/internal/wire"
)

// Payload indexes: the shards index every payload key whatever is
// declared, so a declaration is recorded (a collection's description
// shows it in its payload schema) and changes no answer, but for uuid:
// as Qdrant's uuid index, it makes match conditions on the key compare
// UUIDs (coordinator.Collection.UUIDKeys).

// payloadTypes are the payload schema types a declaration may name: those
// whose Qdrant index matches as trawl's filters do.
var payloadTypes = map[string]bool{
	"keyword": true, "integer": true, "float": true, "bool": true, "datetime": true, "geo": true, "uuid": true,
}

// errTextIndex: on a key with a text index Qdrant's match.text matches
// tokens (lowercased, every query word present), where trawl, which has
// no full-text index, matches a substring as Qdrant does without one.
const errTextIndex = `field_schema text is not supported: a text index makes match.text match lowercased tokens, trawl matches substrings (as Qdrant does without a text index); declare "keyword" or no index`

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
	switch schema {
	case "text":
		return wire.Invalid(errTextIndex)
	}
	if !payloadTypes[schema] {
		return wire.Invalid(fmt.Sprintf("field_schema %q is not a payload schema type: want keyword, integer, float, bool, datetime, geo or uuid", schema))
	}
	return nil
}
