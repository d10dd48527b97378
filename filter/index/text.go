package index

import (
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/trawl-search/trawl/filter"
)

// MaxTextIndexes bounds the text indexes one Index builds (one per key
// and tokenizer that match.text conditions name, in practice one per
// declared text index): past it, such conditions are evaluated per row,
// with the same answers.
const MaxTextIndexes = 16

// textKey names one text index: a dotted key and how its strings are
// tokenized.
type textKey struct {
	key string
	t   filter.TextIndex
}

// textPostings is one text index: for each token, the rows whose strings
// at the key hold it (an array's strings together, as Qdrant indexes a
// point).
type textPostings struct {
	path   []string
	t      filter.TextIndex
	tokens map[string]*roaring.Bitmap
}

// rowTokens is the distinct tokens of the strings at p.path in doc.
func (p *textPostings) rowTokens(doc map[string]any) map[string]struct{} {
	v, ok := filter.Lookup(doc, p.path)
	if !ok || v == nil {
		return nil
	}
	out := map[string]struct{}{}
	add := func(e any) {
		if s, ok := e.(string); ok {
			p.t.Tokens(s, func(tok string) { out[tok] = struct{}{} })
		}
	}
	if a, ok := v.([]any); ok {
		for _, e := range a {
			add(e)
		}
	} else {
		add(v)
	}
	return out
}

func (p *textPostings) update(row uint32, doc map[string]any, add bool) {
	for tok := range p.rowTokens(doc) {
		p.tokens = updateMap(p.tokens, tok, row, add, nil)
	}
}

// updateTexts keeps the text indexes built so far up to date with a row's
// Add or Remove. Writes hold the store exclusively, but Select may build
// an index under a shared hold, so the map is read under textMu.
func (ix *Index) updateTexts(row uint32, doc map[string]any, add bool) {
	ix.textMu.Lock()
	defer ix.textMu.Unlock()
	for _, p := range ix.texts {
		p.update(row, doc, add)
	}
}

// text returns the text index of key tokenized by t over rows [0, n),
// building it from the payloads on first use; nil when MaxTextIndexes
// are built already.
func (ix *Index) text(key string, t filter.TextIndex, n int, doc func(uint32) map[string]any) *textPostings {
	ix.textMu.Lock()
	defer ix.textMu.Unlock()
	k := textKey{key, t}
	if p, ok := ix.texts[k]; ok {
		return p
	}
	if len(ix.texts) >= MaxTextIndexes {
		return nil
	}
	p := &textPostings{path: strings.Split(key, "."), t: t, tokens: map[string]*roaring.Bitmap{}}
	for r := 0; r < n; r++ {
		p.update(uint32(r), doc(uint32(r)), true)
	}
	if ix.texts == nil {
		ix.texts = map[textKey]*textPostings{}
	}
	ix.texts[k] = p
	return p
}

// TextIndexes is how many text indexes are built.
func (ix *Index) TextIndexes() int {
	ix.textMu.Lock()
	defer ix.textMu.Unlock()
	return len(ix.texts)
}

// textCond plans a match.text or match.text_any condition with a text
// index: the intersection (text) or union (text_any) of its tokens'
// postings, exact; a query without tokens matches no row. ok is false
// when no text index is available for it.
func (s *selector) textCond(c *filter.Condition) (b *roaring.Bitmap, ok bool) {
	p := s.ix.text(c.Key, *c.TextIndex, s.n, s.src.Doc)
	if p == nil {
		return nil, false
	}
	q := c.TextIndex.TokenSet(c.Value.Str)
	if len(q) == 0 {
		return roaring.New(), true
	}
	bs := make([]*roaring.Bitmap, 0, len(q))
	for _, tok := range q {
		pb := p.tokens[tok]
		if pb == nil {
			if c.Op == filter.OpText {
				return roaring.New(), true // a token no row holds
			}
			continue
		}
		bs = append(bs, pb)
	}
	if c.Op == filter.OpTextAny {
		return roaring.FastOr(bs...), true
	}
	return roaring.FastAnd(bs...), true
}
