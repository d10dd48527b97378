package qdrantx

import (
	"fmt"

	"github.com/trawl-search/trawl/api/internal/wire"
)

// Payload indexes: the shards index every payload key whatever is
// declared, so a declaration is recorded (a collection's description
// shows it in its payload schema) and changes no answer.

// payloadTypes are the payload schema types a declaration may name: those
// whose Qdrant index matches as trawl's filters do.
var payloadTypes = map[string]bool{
	"keyword": true, "integer": true, "float": true, "bool": true, "datetime": true, "geo": true,
}

// errTextIndex: on a key with a text index Qdrant's match.text matches
// tokens (lowercased, every query word present), where trawl, which has
// no full-text index, matches a substring as Qdrant does without one.
const errTextIndex = `field_schema text is not supported: a text index makes match.text match lowercased tokens, trawl matches substrings (as Qdrant does without a text index); declare "keyword" or no index`

// errUUIDIndex: Qdrant's uuid index parses the strings it compares, so
// it matches differently written UUIDs ("8A1E…" and "8a1e…") that trawl's
// exact string match keeps apart.
const errUUIDIndex = `field_schema uuid is not supported: a uuid index matches UUIDs written differently (case, braces) as equal, trawl matches strings exactly; declare "keyword"`

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
	case "uuid":
		return wire.Invalid(errUUIDIndex)
	case "text":
		return wire.Invalid(errTextIndex)
	}
	if !payloadTypes[schema] {
		return wire.Invalid(fmt.Sprintf("field_schema %q is not a payload schema type: want keyword, integer, float, bool, datetime or geo", schema))
	}
	return nil
}
