package api

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/trawl-search/trawl/vector"
)

// writeBody is a write of n vectors of dim as `router load` sends them:
// "id", "vector_b64" and, with payload, a "payload" object.
func writeBody(n, dim int, payload bool) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.WriteString(`{"vectors":[`)
	raw := make([]byte, 4*dim)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		for j := range dim {
			binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(r.Float32()-0.5))
		}
		fmt.Fprintf(&b, `{"id":"%d","vector_b64":"%s"`, i, base64.StdEncoding.EncodeToString(raw))
		if payload {
			fmt.Fprintf(&b, `,"payload":{"n":%d,"tag":"t\"%d}","o":{"a":null,"xs":[1,"]"]}}`, i, i%3)
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// requireSameRecords fails unless the one pass took b and returned what
// encoding/json returns for it.
func requireSameRecords(t *testing.T, b []byte, s schema, fast []record) {
	t.Helper()
	slow, err := decodeWriteJSON(b, s)
	if err != nil {
		t.Fatalf("one pass took %q, encoding/json refuses it: %v", b, err)
	}
	if len(fast) != len(slow) {
		t.Fatalf("%d records, encoding/json %d", len(fast), len(slow))
	}
	for i := range fast {
		f, w := fast[i], slow[i]
		if f.ID != w.ID || !bytes.Equal(f.Payload, w.Payload) || (f.Payload == nil) != (w.Payload == nil) ||
			!bytes.Equal(vector.EncodeLE(f.Vector), vector.EncodeLE(w.Vector)) {
			t.Fatalf("record %d: %+v, encoding/json %+v", i, f, w)
		}
	}
}

// The loader's shape is read in one pass, to the same records.
func TestDecodeWriteOnePass(t *testing.T) {
	s := schema{Dim: 1536, Metric: vector.Cosine}
	for _, payload := range []bool{false, true} {
		b := writeBody(MaxWriteBatch, 1536, payload)
		recs, ok := decodeWriteFast(b, s)
		if !ok {
			t.Fatalf("payload %v: the loader's shape is not read in one pass", payload)
		}
		requireSameRecords(t, b, s, recs)
	}
	v := fuzzB64(1, 2, 3, 4)
	for _, body := range []string{
		` { "vectors" : [ { "vector_b64" : "` + v + `" , "id" : "é" , "payload" : null } ] } ` + "\n",
		`{"vectors":[{"id":"a","vector_b64":"` + v + `","payload":{"k":"v\\\"}"}}]}`,
	} {
		recs, ok := decodeWriteFast([]byte(body), fuzzSchemas[0])
		if !ok {
			t.Fatalf("%s: not read in one pass", body)
		}
		requireSameRecords(t, []byte(body), fuzzSchemas[0], recs)
	}
}

// Whatever the one pass cannot read exactly as encoding/json does, it
// leaves to it: the answer, error or records, is encoding/json's.
func TestDecodeWriteLeavesTheRestToJSON(t *testing.T) {
	v := fuzzB64(1, 2, 3, 4)
	nl := v[:4] + "\n" + v[4:]
	for _, body := range []string{
		`{"vectors":[{"id":"a","vector_b64":"` + nl + `"}]}`,                                    // raw newline: bad JSON
		`{"vectors":[{"id":"a","vector_b64":"` + v[:4] + `\n` + v[4:] + `"}]}`,                  // an escape
		`{"vectors":[{"id":"a","vector_b64":"` + strings.TrimRight(v, "=") + `"}]}`,             // unpadded
		`{"vectors":[{"ID":"a","vector_b64":"` + v + `"}]}`,                                     // another case
		`{"vectors":[{"id":"a","id":"b","vector_b64":"` + v + `"}]}`,                            // a repeated member
		`{"vectors":[{"id":"a\u00e9","vector_b64":"` + v + `"}]}`,                               // an escaped id
		`{"vectors":[{"id":"a","vector":[1,2,3,4]}]}`,                                           // numbers
		`{"vectors":[{"id":"a","vector_b64":"` + v + `"},{"id":"a","vector_b64":"` + v + `"}]}`, // a repeated id
		`{"vectors":[{"id":"a","vector_b64":"` + v + `","payload":[1]}]}`,                       // not an object
		`{"vectors":[{"id":"a","vector_b64":"` + v + `","payload":{"a":1,}}]}`,                  // bad payload
		`{"vectors":[{"id":"a","vector_b64":"` + v + `"}]} x`,                                   // trailing data
		`{"vectors":[]}`,
		`{"vectors":[{"id":"a","vector_b64":"` + fuzzB64(0, 0, 0, 0) + `"}]}`, // zero vector
	} {
		if _, ok := decodeWriteFast([]byte(body), fuzzSchemas[0]); ok {
			t.Errorf("%s: read in one pass", body)
		}
	}
}

func FuzzDecodeWriteOnePass(f *testing.F) {
	v := fuzzB64(1, 2, 3, 4)
	f.Add([]byte(`{"vectors":[{"id":"a","vector_b64":"` + v + `","payload":{"k":[1,"}"]}},{"id":"b","vector_b64":"` + v + `"}]}`))
	f.Add([]byte(`{"vectors":[{"id":"a","vector_b64":"` + v + `","payload":null}]}`))
	f.Add(writeBody(2, fuzzDim, true))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range fuzzSchemas {
			if recs, ok := decodeWriteFast(b, s); ok {
				requireSameRecords(t, b, s, recs)
			}
		}
	})
}

// BenchmarkDecodeWrite decodes one full write of 1536-D vectors as `router
// load` sends it, by the one pass (as decodeWrite does) and by
// encoding/json alone.
func BenchmarkDecodeWrite(b *testing.B) {
	s := schema{Dim: 1536, Metric: vector.Cosine}
	body := writeBody(MaxWriteBatch, 1536, false)
	for _, c := range []struct {
		name   string
		decode func([]byte, schema) ([]record, error)
	}{{"one-pass", decodeWrite}, {"encoding-json", decodeWriteJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.decode(body, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
