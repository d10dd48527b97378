package index

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter"
)

// textVocab is small, so random queries often match: mixed case and
// punctuation exercise the tokenizers and lowercasing.
var textVocab = []string{"Go", "go", "rust", "Vector", "search", "fast,", "fox", "über", "x-ray", "a", "b.c", "42"}

func randomText(rng *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = textVocab[rng.IntN(len(textVocab))]
	}
	return strings.Join(w, " ")
}

func randomTextDoc(t testing.TB, rng *rand.Rand) map[string]any {
	var v any
	switch rng.IntN(6) {
	case 0:
		v = []string{randomText(rng, 1+rng.IntN(3)), randomText(rng, 1+rng.IntN(3))}
	case 1:
		v = rng.IntN(5) // not a string: never matches
	case 2:
		return decode(t, `{"other": "go"}`)
	default:
		v = randomText(rng, 1+rng.IntN(6))
	}
	b, err := json.Marshal(map[string]any{"t": v, "n": rng.IntN(3)})
	require.NoError(t, err)
	return decode(t, string(b))
}

// TestTextSelectEqualsMatch: with text indexes of several tokenizers,
// through random inserts, overwrites, deletes and a rebuild (Reset, then
// every row added again, as a store reloads), Select of random
// match.text and match.text_any filters equals evaluating every row.
func TestTextSelectEqualsMatch(t *testing.T) {
	indexes := []filter.TextIndex{
		filter.DefaultTextIndex(),
		{Tokenizer: filter.TokenizerWhitespace, Lowercase: true},
		{Tokenizer: filter.TokenizerWord, MinTokenLen: 2, MaxTokenLen: 4},
	}
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 37))
			r := &rows{ix: New(Config{})}
			for round := range 20 {
				for range 10 + rng.IntN(30) {
					switch n := len(r.docs); {
					case n > 0 && rng.IntN(4) == 0:
						r.delete(rng.IntN(n))
					case n > 0 && rng.IntN(4) == 0:
						r.set(rng.IntN(n), randomTextDoc(t, rng))
					default:
						r.add(randomTextDoc(t, rng))
					}
				}
				if round == 10 {
					r.ix.Reset()
					for i, d := range r.docs {
						r.ix.Add(uint32(i), d)
					}
				}
				r.ix.Flush()
				for range 20 {
					op := "text"
					if rng.IntN(3) == 0 {
						op = "text_any"
					}
					q, _ := json.Marshal(randomText(rng, rng.IntN(3)))
					src := fmt.Sprintf(`{"must":[{"key":"t","match":{%q:%s}}]}`, op, q)
					if rng.IntN(3) == 0 {
						src = fmt.Sprintf(`{"must":[{"key":"n","match":{"value":%d}}],"must_not":[{"key":"t","match":{%q:%s}}]}`, rng.IntN(3), op, q)
					}
					f, err := filter.Parse([]byte(src))
					require.NoError(t, err, src)
					f = f.WithTextIndexes(map[string]filter.TextIndex{"t": indexes[rng.IntN(len(indexes))]})
					require.Equal(t, r.brute(f), r.selectRows(f), "round %d filter %s", round, src)
				}
				require.Equal(t, len(indexes), r.ix.TextIndexes(), "built once per tokenizer, kept up to date")
			}
		})
	}
}

// TestTextIndexesBounded: past MaxTextIndexes, conditions are evaluated
// per row, with the same answers.
func TestTextIndexesBounded(t *testing.T) {
	r := &rows{ix: New(Config{})}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		r.add(randomTextDoc(t, rng))
	}
	r.ix.Flush()
	f, err := filter.Parse([]byte(`{"must":{"key":"t","match":{"text":"go rust"}}}`))
	require.NoError(t, err)
	for n := 1; n <= MaxTextIndexes+2; n++ {
		g := f.WithTextIndexes(map[string]filter.TextIndex{"t": {Tokenizer: filter.TokenizerWord, MaxTokenLen: n + 10}})
		require.Equal(t, r.brute(g), r.selectRows(g))
	}
	require.Equal(t, MaxTextIndexes, r.ix.TextIndexes())
}

// BenchmarkTextIndexBuild: building the text index of 100 000 rows of
// 30 words each (a Zipf vocabulary of 30 000, s = 1.1) from their
// payloads, as the first match.text query after a load does: the CPU
// time of a build (wall time on a shared machine says little), and what
// the postings hold: heap bytes per (token, row) posting and per row.
//
//	go test -run '^$' -bench BenchmarkTextIndexBuild -benchtime 3x ./filter/index
func BenchmarkTextIndexBuild(b *testing.B) {
	const rows, words = 100000, 30
	rng := rand.New(rand.NewPCG(1, 1))
	zipf := rand.NewZipf(rng, 1.1, 1, 29999)
	docs := make([]map[string]any, rows)
	postings := 0
	for i := range docs {
		w := make([]string, words)
		seen := map[string]bool{}
		for j := range w {
			w[j] = fmt.Sprintf("w%d", zipf.Uint64())
			seen[w[j]] = true
		}
		postings += len(seen)
		docs[i] = map[string]any{"body": strings.Join(w, " ")}
	}
	q, err := filter.Parse([]byte(`{"must":{"key":"body","match":{"text":"w1 w2"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	q = q.WithTextIndexes(map[string]filter.TextIndex{"body": filter.DefaultTextIndex()})
	src := Source{Doc: func(r uint32) map[string]any { return docs[r] }}
	var heap uint64
	var cpu time.Duration // the process's CPU time in builds, garbage collection included
	builds := 0
	for b.Loop() {
		b.StopTimer()
		ix := New(Config{MaxStringBytes: 1}) // strings over a byte unindexed: the text index alone
		for i, d := range docs {
			ix.Add(uint32(i), d)
		}
		ix.Flush()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var ru0, ru1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		b.StartTimer()
		ix.Select(q, rows, src)
		b.StopTimer()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu += time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
		builds++
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		if ix.TextIndexes() != 1 {
			b.Fatal("the text index was not built")
		}
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(builds), "cpu-s/build")
	b.ReportMetric(float64(heap)/float64(postings), "B/posting")
	b.ReportMetric(float64(heap)/rows, "B/row")
	b.ReportMetric(float64(postings)/rows, "postings/row")
}
