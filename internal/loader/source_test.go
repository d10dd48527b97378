package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// onlyReader hides a bytes.Reader's Seek, so Skip must read through.
type onlyReader struct{ io.Reader }

func readAll(t *testing.T, s Source) []Record {
	var out []Record
	for {
		rec, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, rec)
	}
}

func le(v []float32) []byte {
	var b []byte
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func TestSourcesYieldEveryRecord(t *testing.T) {
	rows := corpus(25, 6)
	for _, tc := range []struct {
		name    string
		open    func(seek bool) (Source, error)
		total   int64
		id      func(i int) string
		payload func(i int) string
	}{
		{"npy v1", func(seek bool) (Source, error) { return NewNpy(reader(npyBytes(1, rows), seek)) }, 25, strconv.Itoa, nil},
		{"npy v2", func(seek bool) (Source, error) { return NewNpy(reader(npyBytes(2, rows), seek)) }, 25, strconv.Itoa, nil},
		{"fvecs", func(seek bool) (Source, error) {
			b := fvecsBytes(rows)
			return NewFvecs(reader(b, seek), int64(len(b)))
		}, 25, strconv.Itoa, nil},
		{"jsonl", func(seek bool) (Source, error) { return NewJSONL(reader(jsonlBytes(t, rows), seek)), nil }, -1,
			func(i int) string { return "j-" + strconv.Itoa(i) }, jsonlPayload},
	} {
		for _, seek := range []bool{true, false} {
			for _, skip := range []int64{0, 1, 7, 25} {
				t.Run(tc.name+"/seek="+strconv.FormatBool(seek)+"/skip="+strconv.FormatInt(skip, 10), func(t *testing.T) {
					s, err := tc.open(seek)
					require.NoError(t, err)
					require.Equal(t, tc.total, s.Total())
					require.NoError(t, s.Skip(skip))
					recs := readAll(t, s)
					require.Len(t, recs, len(rows)-int(skip))
					for k, rec := range recs {
						i := int(skip) + k
						require.Equal(t, tc.id(i), rec.ID)
						require.Equal(t, le(rows[i]), rec.Vector, "record %d", i)
						want := ""
						if tc.payload != nil {
							want = tc.payload(i)
						}
						require.Equal(t, want, string(rec.Payload), "record %d: payload verbatim", i)
					}
					require.Error(t, s.Skip(1), "past the end")
				})
			}
		}
	}
}

func reader(b []byte, seek bool) io.Reader {
	if seek {
		return bytes.NewReader(b)
	}
	return onlyReader{bytes.NewReader(b)}
}

func TestSourcesRefuseBadInput(t *testing.T) {
	good := npyBytes(1, corpus(2, 3))
	fv := fvecsBytes(corpus(3, 4))
	for _, tc := range []struct {
		name string
		open func() (Source, error)
		want string
	}{
		{"npy magic", func() (Source, error) { return NewNpy(bytes.NewReader([]byte("PK\x03\x04....."))) }, "not a .npy file"},
		{"npy dtype", func() (Source, error) {
			return NewNpy(bytes.NewReader(bytes.Replace(good, []byte("<f4"), []byte("<f8"), 1)))
		}, "float32"},
		{"npy fortran", func() (Source, error) {
			return NewNpy(bytes.NewReader(bytes.Replace(good, []byte("False"), []byte("True "), 1)))
		}, "C order"},
		{"npy 1-D", func() (Source, error) {
			return NewNpy(bytes.NewReader(bytes.Replace(good, []byte("(2, 3)"), []byte("(6,)  "), 1)))
		}, "2-D"},
		{"npy version", func() (Source, error) {
			b := bytes.Clone(good)
			b[6] = 9
			return NewNpy(bytes.NewReader(b))
		}, "version 9"},
		{"npy header", func() (Source, error) { return NewNpy(bytes.NewReader(good[:20])) }, "truncated .npy header"},
		{"fvecs empty", func() (Source, error) { return NewFvecs(bytes.NewReader(nil), 0) }, "empty"},
		{"fvecs dim", func() (Source, error) { return NewFvecs(bytes.NewReader([]byte{0, 0, 0, 0}), 4) }, "out of range"},
		{"fvecs size", func() (Source, error) { return NewFvecs(bytes.NewReader(fv[:len(fv)-2]), int64(len(fv)-2)) }, "whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.open()
			require.ErrorContains(t, err, tc.want)
		})
	}

	t.Run("npy truncated rows", func(t *testing.T) {
		s, err := NewNpy(bytes.NewReader(good[:len(good)-1]))
		require.NoError(t, err)
		_, err = s.Next()
		require.NoError(t, err)
		_, err = s.Next()
		require.ErrorContains(t, err, "truncated .npy at record 1")
	})
	t.Run("fvecs dimension changes", func(t *testing.T) {
		b := append(bytes.Clone(fv[:20]), fvecsBytes(corpus(1, 3))...)
		b = append(b, 0, 0, 0, 0) // keep the size a whole number of 4-d records
		s, err := NewFvecs(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		_, err = s.Next()
		require.NoError(t, err)
		_, err = s.Next()
		require.ErrorContains(t, err, "record 1 has dimension 3, the first had 4")
	})
}

func TestJSONLLines(t *testing.T) {
	for _, tc := range []struct {
		line    string
		id      string
		payload string
		err     string
	}{
		{line: `{"id":"a","vector":[1,2]}`, id: "a"},
		{line: `{"id":42,"vector":[1,2]}`, id: "42"},
		{line: `{"id":"a","vector":[1,2],"payload":null}`, id: "a"},
		{line: `{"id":"a","vector":[1,2],"payload": {"k" : [1, {"x":null}]} }`, id: "a", payload: `{"k" : [1, {"x":null}]}`},
		{line: `{"id":"a","vector":[1,2],"payload":[1]}`, err: "must be a JSON object"},
		{line: `{"id":"a","vector":[1,2],"payload":"s"}`, err: "must be a JSON object"},
		{line: `{"vector":[1,2]}`, err: `missing "id"`},
		{line: `{"id":"","vector":[1,2]}`, err: `empty "id"`},
		{line: `{"id":-1,"vector":[1,2]}`, err: "non-negative integer"},
		{line: `{"id":1.5,"vector":[1,2]}`, err: "non-negative integer"},
		{line: `{"id":true,"vector":[1,2]}`, err: "non-negative integer"},
		{line: `{"id":"a"}`, err: `missing or empty "vector"`},
		{line: `{"id":"a","vector":[]}`, err: `missing or empty "vector"`},
		{line: `{"id":"a","vector":["x"]}`, err: "cannot unmarshal"},
		{line: `{"id":"a","vector":[1e39]}`, err: "cannot unmarshal"},
		{line: `{"id":"a","vectors":[1]}`, err: `unknown field "vectors"`},
		{line: `{"id":"a","vector":[1]} {"id":"b"}`, err: "data after"},
		{line: `{"id":"a","vector":[1]`, err: "unexpected EOF"},
		{line: `[1,2]`, err: "cannot unmarshal array"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			rec, err := decodeLine([]byte(tc.line))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.id, rec.ID)
			require.Equal(t, le([]float32{1, 2}), rec.Vector)
			require.Equal(t, tc.payload, string(rec.Payload))
		})
	}
}

func TestJSONLErrorsNameTheLine(t *testing.T) {
	s := NewJSONL(bytes.NewReader([]byte("{\"id\":\"a\",\"vector\":[1]}\n\n{\"id\":\"b\"}\n")))
	_, err := s.Next()
	require.NoError(t, err)
	_, err = s.Next()
	require.ErrorContains(t, err, "line 3 (record 1)")
}

func TestJSONLRefusesHugeLines(t *testing.T) {
	s := NewJSONL(bytes.NewReader(bytes.Repeat([]byte{' '}, maxLine+1)))
	_, err := s.Next()
	require.ErrorContains(t, err, "longer than")
}

func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","vector":[1,2]}`, `{"id":7,"vector":[0.5],"payload":{"a":[1,"x",null]}}`,
		`{"id":"a","vector":[1],"payload":null}`, `{}`, `[]`, `{"id":"a","vector":[1]} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := decodeLine(line)
		if err != nil {
			return
		}
		if rec.ID == "" || len(rec.Vector) == 0 || len(rec.Vector)%4 != 0 {
			t.Fatalf("accepted %q as %+v", line, rec)
		}
		if rec.Payload != nil && (rec.Payload[0] != '{' || !jsonValid(rec.Payload)) {
			t.Fatalf("payload %q of %q is not a JSON object", rec.Payload, line)
		}
		// What is accepted must encode to an entry the router can decode.
		var e entry
		if err := jsonUnmarshalStrict(appendEntry(nil, rec), &e); err != nil || e.ID != rec.ID {
			t.Fatalf("entry of %q: %v (id %q)", line, err, e.ID)
		}
	})
}

func TestOpenChoosesTheFormatByExtension(t *testing.T) {
	dir := t.TempDir()
	rows := corpus(3, 4)
	for name, b := range map[string][]byte{
		"v.npy": npyBytes(1, rows), "v.fvecs": fvecsBytes(rows), "v.JSONL": jsonlBytes(t, rows), "v.ndjson": jsonlBytes(t, rows),
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		f, err := Open(path)
		require.NoError(t, err, name)
		require.Len(t, readAll(t, f), 3, name)
		require.NoError(t, f.Close())
	}
	_, err := Open(filepath.Join(dir, "v.csv"))
	require.ErrorContains(t, err, "unknown format")
	_, err = Open(filepath.Join(dir, "missing.npy"))
	require.ErrorIs(t, err, os.ErrNotExist)
	bad := filepath.Join(dir, "bad.npy")
	require.NoError(t, os.WriteFile(bad, []byte("nope"), 0o600))
	_, err = Open(bad)
	require.ErrorContains(t, err, "bad.npy: not a .npy file")
}
