package filter

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// Tokenizers a text index may use: Qdrant's word and whitespace
// tokenizers. Its prefix and multilingual tokenizers are refused (their
// answers need n-gram postings and a language segmenter).
const (
	TokenizerWord       = "word"
	TokenizerWhitespace = "whitespace"
)

// SchemaText is the payload schema type of a text index; a text index
// with other than the default parameters is recorded as SchemaText
// followed by its canonical JSON (TextIndex.Schema).
const SchemaText = "text"

// MaxTokenLen bounds a text index's min_token_len and max_token_len (a
// token longer than any word is a mistake, not a setting).
const MaxTokenLen = 1 << 16

// TextIndex is a text payload index's parameters (Qdrant's
// TextIndexParams): how a string is cut into the tokens that match.text
// compares. With a text index on a key, {"key", "match": {"text": q}}
// holds when every token of q is among the tokens of the strings at the
// key (all of them, an array's strings together, as Qdrant indexes a
// point), and match.text_any when one is; a q without tokens matches
// nothing. Without one, match.text is a substring test (Condition).
type TextIndex struct {
	// Tokenizer is TokenizerWord (runs of alphabetic and numeric
	// characters, as Qdrant's word tokenizer splits at every char that
	// is not alphanumeric) or TokenizerWhitespace (runs between Unicode
	// spaces).
	Tokenizer string
	// Lowercase lowercases every token with Unicode's full case mapping
	// (golang.org/x/text/cases), as Rust's str::to_lowercase does for
	// Qdrant: a final Σ becomes ς, İ becomes i̇.
	Lowercase bool
	// MinTokenLen and MaxTokenLen, in characters, drop shorter and
	// longer tokens from documents and queries alike; 0 is no bound.
	MinTokenLen, MaxTokenLen int
}

// DefaultTextIndex is Qdrant's default text index: word tokens,
// lowercased, of any length.
func DefaultTextIndex() TextIndex { return TextIndex{Tokenizer: TokenizerWord, Lowercase: true} }

// Tokens calls fn with each token of s in order, repeats included.
func (t TextIndex) Tokens(s string, fn func(string)) {
	var parts []string
	if t.Tokenizer == TokenizerWhitespace {
		parts = strings.Fields(s)
	} else {
		parts = strings.FieldsFunc(s, func(r rune) bool { return !alphanumeric(r) })
	}
	var lower *cases.Caser // not safe to share: one per call, made when needed
	for _, tok := range parts {
		switch {
		case !t.Lowercase:
		case isASCII(tok):
			tok = strings.ToLower(tok) // the same, and cheaper
		default:
			if lower == nil {
				c := cases.Lower(language.Und)
				lower = &c
			}
			tok = lower.String(tok)
		}
		if t.MinTokenLen > 0 || t.MaxTokenLen > 0 {
			n := utf8.RuneCountInString(tok)
			if n < t.MinTokenLen || t.MaxTokenLen > 0 && n > t.MaxTokenLen {
				continue
			}
		}
		fn(tok)
	}
}

// alphanumeric is Rust's char::is_alphanumeric, which Qdrant's word
// tokenizer keeps: Unicode's Alphabetic property (letters, letter
// numbers, and the marks in Other_Alphabetic, such as Indic vowel signs)
// or a number.
func alphanumeric(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Other_Alphabetic, r)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// TokenSet is the distinct tokens of s, sorted.
func (t TextIndex) TokenSet(s string) []string {
	var out []string
	t.Tokens(s, func(tok string) { out = append(out, tok) })
	slices.Sort(out)
	return slices.Compact(out)
}

// Schema is t as a payload schema declaration: SchemaText for the
// default parameters, else SchemaText followed by t's canonical JSON.
func (t TextIndex) Schema() string {
	if t == DefaultTextIndex() {
		return SchemaText
	}
	return SchemaText + string(t.appendJSON(nil))
}

// TextIndexOf reads a payload schema declaration: a text index's
// parameters, and whether schema declares one.
func TextIndexOf(schema string) (TextIndex, bool) {
	rest, ok := strings.CutPrefix(schema, SchemaText)
	if !ok {
		return TextIndex{}, false
	}
	if rest == "" {
		return DefaultTextIndex(), true
	}
	t, err := ParseTextIndex([]byte(rest))
	return t, err == nil
}

// SchemaType is a payload schema declaration's type: the declaration
// itself, but for a text index with parameters, SchemaText.
func SchemaType(schema string) string {
	if _, ok := TextIndexOf(schema); ok {
		return SchemaText
	}
	return schema
}

func (t TextIndex) appendJSON(b []byte) []byte {
	b = append(b, `{"tokenizer":`...)
	b = appendString(b, t.Tokenizer)
	b = append(b, `,"lowercase":`...)
	b = strconv.AppendBool(b, t.Lowercase)
	if t.MinTokenLen > 0 {
		b = append(b, `,"min_token_len":`...)
		b = appendInt(b, int64(t.MinTokenLen))
	}
	if t.MaxTokenLen > 0 {
		b = append(b, `,"max_token_len":`...)
		b = appendInt(b, int64(t.MaxTokenLen))
	}
	return append(b, '}')
}

// ParseTextIndex reads a text index's parameters as Qdrant's
// TextIndexParams JSON spells them: {"type": "text", "tokenizer",
// "lowercase", "min_token_len", "max_token_len"}, absent ones (and
// null) at Qdrant's defaults. Parameters that only place Qdrant's index
// (on_disk, enable_hnsw) are accepted; those that would change answers
// in ways trawl does not follow (a prefix or multilingual tokenizer,
// phrase_matching, stopwords, a stemmer, ascii_folding) are an error
// naming them. Errors are *Error, their paths starting at "field_schema".
func ParseTextIndex(b []byte) (TextIndex, error) {
	root := path{"field_schema"}
	v, err := parseTree(b, root, 4, false)
	if err != nil {
		return TextIndex{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return TextIndex{}, root.errorf("is %s, want a text index's params object", kindOf(v))
	}
	return parseTextIndex(root, m)
}

func parseTextIndex(p path, m map[string]any) (TextIndex, error) {
	t := DefaultTextIndex()
	for _, k := range sortedKeys(m) {
		kp, x := p.key(k), m[k]
		if x == nil {
			continue
		}
		switch k {
		case "type":
			if s, ok := x.(string); !ok || s != SchemaText {
				return TextIndex{}, kp.errorf(`is %s, want "text"`, jsonOf(x))
			}
		case "tokenizer":
			s, ok := x.(string)
			if !ok {
				return TextIndex{}, kp.errorf("is %s, want a string", kindOf(x))
			}
			switch s {
			case TokenizerWord, TokenizerWhitespace:
				t.Tokenizer = s
			case "prefix", "multilingual":
				return TextIndex{}, kp.errorf("%q is not supported; trawl's text index tokenizes by word or whitespace", s)
			default:
				return TextIndex{}, kp.errorf("%q is not a tokenizer; want word or whitespace (prefix and multilingual are not supported)", s)
			}
		case "lowercase":
			bv, ok := x.(bool)
			if !ok {
				return TextIndex{}, kp.errorf("is %s, want a boolean", kindOf(x))
			}
			t.Lowercase = bv
		case "min_token_len", "max_token_len":
			n, ok := x.(json.Number)
			var i int64
			var err error
			if ok {
				i, err = strconv.ParseInt(string(n), 10, 64)
			}
			if !ok || err != nil || i < 0 || i > MaxTokenLen {
				return TextIndex{}, kp.errorf("is %s, want an integer in 0..%d", jsonOf(x), MaxTokenLen)
			}
			if k == "min_token_len" {
				t.MinTokenLen = int(i)
			} else {
				t.MaxTokenLen = int(i)
			}
		case "on_disk", "enable_hnsw", "phrase_matching", "ascii_folding":
			bv, ok := x.(bool)
			if !ok {
				return TextIndex{}, kp.errorf("is %s, want a boolean", kindOf(x))
			}
			if bv && k != "on_disk" && k != "enable_hnsw" {
				return TextIndex{}, kp.errorf("is not supported; trawl's text index matches tokens, without %s", strings.ReplaceAll(k, "_", " "))
			}
		case "stopwords", "stemmer":
			return TextIndex{}, kp.errorf("is not supported; trawl's text index keeps every token as written (lowercased if asked)")
		default:
			return TextIndex{}, kp.errorf("unknown field; a text index takes type, tokenizer, lowercase, min_token_len and max_token_len")
		}
	}
	if t.MaxTokenLen > 0 && t.MinTokenLen > t.MaxTokenLen {
		return TextIndex{}, p.errorf("min_token_len %d is over max_token_len %d", t.MinTokenLen, t.MaxTokenLen)
	}
	return t, nil
}

// matchTokens evaluates a match.text or match.text_any condition with a
// text index on the value at its key (found, not null): the tokens of
// every string there against the query's.
func (c *Condition) matchTokens(v any) bool {
	q := c.TextIndex.TokenSet(c.Value.Str)
	if len(q) == 0 {
		return false
	}
	have := map[string]bool{}
	add := func(e any) {
		if s, ok := e.(string); ok {
			c.TextIndex.Tokens(s, func(tok string) { have[tok] = true })
		}
	}
	if a, ok := v.([]any); ok {
		for _, e := range a {
			add(e)
		}
	} else {
		add(v)
	}
	if c.Op == OpTextAny {
		return slices.ContainsFunc(q, func(tok string) bool { return have[tok] })
	}
	for _, tok := range q {
		if !have[tok] {
			return false
		}
	}
	return true
}

// WithTextIndexes is f with its match.text and match.text_any conditions
// on the keys text maps (payload indexes declared text) matching tokens
// by that key's index (Condition.TextIndex), as Qdrant answers them; a
// phrase condition, and conditions inside nested, keep their substring
// meaning. f itself is not changed: a copy is returned when a condition
// changes.
func (f *Filter) WithTextIndexes(text map[string]TextIndex) *Filter {
	if f == nil || len(text) == 0 {
		return f
	}
	return f.rewrite(func(c Condition) (Condition, bool) {
		t, ok := text[c.Key]
		if !ok || c.TextIndex != nil || !(c.Op == OpText && c.Text == "text" || c.Op == OpTextAny) {
			return c, false
		}
		c.TextIndex = &t
		return c, true
	})
}

// rewrite is f with change applied to each of its conditions (nested
// filter objects included, nested conditions on arrays not), copying
// only what changes.
func (f *Filter) rewrite(change func(Condition) (Condition, bool)) *Filter {
	if f == nil {
		return f
	}
	conds := func(cs []Condition) ([]Condition, bool) {
		var out []Condition
		for i, c := range cs {
			nc, ok := c, false
			if c.Op == OpFilter {
				if n := c.Nested.rewrite(change); n != c.Nested {
					nc.Nested, ok = n, true
				}
			} else {
				nc, ok = change(c)
			}
			if !ok {
				continue
			}
			if out == nil {
				out = slices.Clone(cs)
			}
			out[i] = nc
		}
		return out, out != nil
	}
	out, changed := *f, false
	for _, cl := range []*[]Condition{&out.Must, &out.Should, &out.MustNot} {
		if cs, ok := conds(*cl); ok {
			*cl, changed = cs, true
		}
	}
	if ms := f.MinShould; ms != nil {
		if cs, ok := conds(ms.Conds); ok {
			out.MinShould, changed = &MinShould{Conds: cs, Count: ms.Count}, true
		}
	}
	if !changed {
		return f
	}
	return &out
}

// jsonOf shows a decoded JSON value as written, for an error.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return kindOf(v)
	}
	return string(b)
}
