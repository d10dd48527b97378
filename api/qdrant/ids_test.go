package qdrant

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/internal/wire"
)

func TestQdrantIDMapping(t *testing.T) {
	for _, tc := range []struct {
		in, id, back, err string
	}{
		{in: `0`, id: "0", back: `0`},
		{in: `42`, id: "42", back: `42`},
		{in: `18446744073709551615`, id: "18446744073709551615", back: `18446744073709551615`},
		{in: `"550E8400-E29B-41D4-A716-446655440000"`, id: "550e8400-e29b-41d4-a716-446655440000", back: `"550e8400-e29b-41d4-a716-446655440000"`},
		{in: `"550e8400e29b41d4a716446655440000"`, id: "550e8400-e29b-41d4-a716-446655440000", back: `"550e8400-e29b-41d4-a716-446655440000"`},
		{in: `"{550e8400-e29b-41d4-a716-446655440000}"`, id: "550e8400-e29b-41d4-a716-446655440000", back: `"550e8400-e29b-41d4-a716-446655440000"`},
		{in: `"urn:uuid:550e8400-e29b-41d4-a716-446655440000"`, id: "550e8400-e29b-41d4-a716-446655440000", back: `"550e8400-e29b-41d4-a716-446655440000"`},
		{in: `18446744073709551616`, err: "id 18446744073709551616 is not an unsigned 64-bit integer"},
		{in: `-1`, err: "id -1 is not an unsigned 64-bit integer"},
		{in: `1.5`, err: "id 1.5 is not an unsigned 64-bit integer"},
		{in: `1e3`, err: "id 1e3 is not an unsigned 64-bit integer"},
		{in: `"42"`, err: `id "42" is a string; an integer id is sent as a number (42)`},
		{in: `""`, err: `id is 0 bytes, want 1..256`},
		// trawl's own ids (written through /v1) pass as they are.
		{in: `"doc-7"`, id: "doc-7", back: `"doc-7"`},
		{in: `"007"`, id: "007", back: `"007"`},
		{in: `"550e8400-e29b-41d4-a716-44665544000g"`, id: "550e8400-e29b-41d4-a716-44665544000g", back: `"550e8400-e29b-41d4-a716-44665544000g"`},
		{in: `true`, err: "id is a boolean, want an unsigned integer or a UUID string"},
		{in: `null`, err: "id is null, want an unsigned integer or a UUID string"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			id, err := parseID(json.RawMessage(tc.in))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.id, id)
			b, err := json.Marshal(pointID(id))
			require.NoError(t, err)
			require.Equal(t, tc.back, string(b))
		})
	}
	// Ids written through /v1 come back as they are: strings, unless
	// they are canonical integers.
	for in, want := range map[string]string{"doc-7": `"doc-7"`, "007": `"007"`, "7": `7`, "": `""`} {
		b, err := json.Marshal(pointID(in))
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}
	for in, want := range map[string]string{"7": "7", "007": "7", "550E8400E29B41D4A716446655440000": "550e8400-e29b-41d4-a716-446655440000", "doc-7": "doc-7"} {
		got, err := parsePathID(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := parsePathID("18446744073709551616")
	require.Error(t, err)
}

// FuzzQdrantID: any JSON value either is refused or maps to an id that
// maps back to itself — the id a client reads back is the id it wrote,
// in the type it wrote it.
func FuzzQdrantID(f *testing.F) {
	for _, s := range []string{`0`, `42`, `18446744073709551615`, `18446744073709551616`, `-1`, `1.0`,
		`"550e8400-e29b-41d4-a716-446655440000"`, `"550E8400E29B41D4A716446655440000"`, `"{550e8400-e29b-41d4-a716-446655440000}"`,
		`"urn:uuid:550e8400-e29b-41d4-a716-446655440000"`, `"42"`, `"\u0030"`, `[]`, `{}`, `null`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, err := parseID(json.RawMessage(in))
		if err != nil {
			return
		}
		back, err := json.Marshal(pointID(id))
		require.NoError(t, err)
		again, err := parseID(back)
		require.NoError(t, err, "%s -> %q -> %s", in, id, back)
		require.Equal(t, id, again)
		// The type is kept: numbers stay numbers, strings stay strings.
		trimmed := bytes.TrimSpace([]byte(in))
		require.Equal(t, trimmed[0] == '"', back[0] == '"', "%s came back as %s", in, back)
		require.LessOrEqual(t, len(id), wire.MaxIDBytes)
	})
}
