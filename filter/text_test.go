package filter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTextIndexTokens(t *testing.T) {
	word, ws := DefaultTextIndex(), TextIndex{Tokenizer: TokenizerWhitespace, Lowercase: true}
	for _, tc := range []struct {
		name string
		t    TextIndex
		in   string
		want []string
	}{
		{"word splits at punctuation", word, "Hello, World! foo-bar_baz", []string{"hello", "world", "foo", "bar", "baz"}},
		{"word keeps digits", word, "Go 1.22 rocks", []string{"go", "1", "22", "rocks"}},
		{"word keeps repeats", word, "a a A", []string{"a", "a", "a"}},
		{"word keeps Indic vowel signs (Other_Alphabetic)", word, "किताब, हिंदी", []string{"किताब", "हिंदी"}},
		{"word splits at a combining accent (not Alphabetic)", word, "a\u0301b", []string{"a", "b"}},
		{"word over Unicode letters", word, "Grüße, Ångström! 東京タワー", []string{"grüße", "ångström", "東京タワー"}},
		{"lowercase: Unicode's full mapping, final sigma", word, "ΟΔΟΣ ΣΑΣ İstanbul", []string{"οδος", "σας", "i̇stanbul"}},
		{"word: no case folding asked", TextIndex{Tokenizer: TokenizerWord}, "Hello World", []string{"Hello", "World"}},
		{"whitespace keeps punctuation", ws, "Hello, World!\tfoo-bar\n", []string{"hello,", "world!", "foo-bar"}},
		{"whitespace: Unicode spaces", ws, "a\u00a0b\u2003c", []string{"a", "b", "c"}},
		{"empty", word, "", nil},
		{"only punctuation", word, "... --- !!!", nil},
		{"min length in characters", TextIndex{Tokenizer: TokenizerWord, Lowercase: true, MinTokenLen: 3}, "ab abc äöü xy", []string{"abc", "äöü"}},
		{"max length in characters", TextIndex{Tokenizer: TokenizerWord, Lowercase: true, MaxTokenLen: 3}, "ab abcd äöü", []string{"ab", "äöü"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			tc.t.Tokens(tc.in, func(s string) { got = append(got, s) })
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseTextIndex(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want TextIndex
		err  string
	}{
		{in: `{"type":"text"}`, want: DefaultTextIndex()},
		{in: `{"type":"text","tokenizer":"whitespace","lowercase":false,"min_token_len":2,"max_token_len":10,"on_disk":true}`,
			want: TextIndex{Tokenizer: TokenizerWhitespace, MinTokenLen: 2, MaxTokenLen: 10}},
		{in: `{"type":"text","tokenizer":null,"phrase_matching":false}`, want: DefaultTextIndex()},
		{in: `{"type":"text","tokenizer":"prefix"}`, err: `field_schema.tokenizer: "prefix" is not supported`},
		{in: `{"type":"text","tokenizer":"multilingual"}`, err: `field_schema.tokenizer: "multilingual" is not supported`},
		{in: `{"type":"text","tokenizer":"bigram"}`, err: `"bigram" is not a tokenizer`},
		{in: `{"type":"keyword"}`, err: `field_schema.type: is "keyword", want "text"`},
		{in: `{"type":"text","min_token_len":-1}`, err: "field_schema.min_token_len: is -1, want an integer"},
		{in: `{"type":"text","max_token_len":1.5}`, err: "field_schema.max_token_len: is 1.5, want an integer"},
		{in: `{"type":"text","min_token_len":5,"max_token_len":2}`, err: "min_token_len 5 is over max_token_len 2"},
		{in: `{"type":"text","phrase_matching":true}`, err: "field_schema.phrase_matching: is not supported"},
		{in: `{"type":"text","stemmer":{"type":"snowball","language":"english"}}`, err: "field_schema.stemmer: is not supported"},
		{in: `{"type":"text","stopwords":"english"}`, err: "field_schema.stopwords: is not supported"},
		{in: `{"type":"text","lowercase":"yes"}`, err: "field_schema.lowercase: is a string, want a boolean"},
		{in: `{"type":"text","colour":1}`, err: "field_schema.colour: unknown field"},
		{in: `[]`, err: "field_schema: is an array"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTextIndex([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			back, ok := TextIndexOf(got.Schema())
			require.True(t, ok, got.Schema())
			require.Equal(t, got, back)
			require.Equal(t, SchemaText, SchemaType(got.Schema()))
		})
	}
	_, ok := TextIndexOf("keyword")
	require.False(t, ok)
	require.Equal(t, "text", DefaultTextIndex().Schema())
}

func TestMatchTextWithIndex(t *testing.T) {
	doc := func(s string) map[string]any {
		b, err := CheckPayload([]byte(s))
		require.NoError(t, err)
		d, err := DecodePayload(b)
		require.NoError(t, err)
		return d
	}
	idx := map[string]TextIndex{"t": DefaultTextIndex()}
	for _, tc := range []struct {
		filter, doc string
		indexed     bool // with the text index
		plain       bool // substring, without it
	}{
		{`{"must":{"key":"t","match":{"text":"quick fox"}}}`, `{"t":"The Quick brown fox"}`, true, false},
		{`{"must":{"key":"t","match":{"text":"quick fox"}}}`, `{"t":"the quick fox"}`, true, true},
		{`{"must":{"key":"t","match":{"text":"qui"}}}`, `{"t":"the quick fox"}`, false, true},
		{`{"must":{"key":"t","match":{"text":"quick wolf"}}}`, `{"t":"the quick fox"}`, false, false},
		{`{"must":{"key":"t","match":{"text":"quick fox"}}}`, `{"t":["the quick", "brown fox"]}`, true, false},
		{`{"must":{"key":"t","match":{"text":"..."}}}`, `{"t":"wait..."}`, false, true},
		{`{"must":{"key":"t","match":{"text_any":"wolf FOX"}}}`, `{"t":"the quick fox"}`, true, false},
		{`{"must":{"key":"t","match":{"text":"1"}}}`, `{"t":1}`, false, false},
		{`{"must":{"key":"t","match":{"phrase":"quick fox"}}}`, `{"t":"the quick fox"}`, true, true},
		{`{"must":{"key":"t","match":{"phrase":"Quick fox"}}}`, `{"t":"the quick fox"}`, false, false},
	} {
		t.Run(tc.filter+tc.doc, func(t *testing.T) {
			f, err := Parse([]byte(tc.filter))
			require.NoError(t, err)
			d := doc(tc.doc)
			require.Equal(t, tc.plain, f.Match(d), "without a text index")
			g := f.WithTextIndexes(idx)
			require.Equal(t, tc.indexed, g.Match(d), "with a text index")
			require.Equal(t, tc.plain, f.Match(d), "WithTextIndexes changes a copy")
			// The canonical JSON carries the index to the shards.
			b, err := g.MarshalJSON()
			require.NoError(t, err)
			back, err := Parse(b)
			require.NoError(t, err)
			require.Equal(t, tc.indexed, back.Match(d), string(b))
			b2, err := back.MarshalJSON()
			require.NoError(t, err)
			require.Equal(t, string(b), string(b2))
		})
	}
}

func TestConditionTextIndexErrors(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"must":{"key":"t","range":{"gt":1},"text_index":{}}}`, "filter.must.text_index: goes with match.text or match.text_any only"},
		{`{"must":{"key":"t","match":{"value":"a"},"text_index":{}}}`, "filter.must.text_index: goes with match.text or match.text_any only"},
		{`{"must":{"key":"t","match":{"phrase":"a"},"text_index":{}}}`, "filter.must.text_index: goes with match.text or match.text_any only"},
		{`{"must":{"key":"t","match":{"text":"a"},"text_index":{"tokenizer":"prefix"}}}`, `filter.must.text_index.tokenizer: "prefix" is not supported`},
		{`{"must":{"key":"t","match":{"text":"a"},"text_index":[]}}`, "filter.must.text_index: is an array"},
	} {
		_, err := Parse([]byte(tc.in))
		require.ErrorContains(t, err, tc.err, tc.in)
	}
}
