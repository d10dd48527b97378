package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter"
)

func mustFilter(t *testing.T, s string) *filter.Filter {
	t.Helper()
	f, err := filter.Parse([]byte(s))
	require.NoError(t, err)
	return f
}

// docs is every document as id → "vector payload", and the ids the
// payload index selects for f.
func docs(t *testing.T, m *Memory, f *filter.Filter) (map[string]string, []string) {
	t.Helper()
	out := map[string]string{}
	var sel []string
	require.NoError(t, m.ViewScan(func(v *ScanView) error {
		for i, id := range m.ids {
			out[id] = fmt.Sprint(v.Rows.Row(i)) + " " + string(m.payloads[i])
		}
		rows, err := v.Select(f)
		for _, r := range rows {
			sel = append(sel, m.ids[r])
		}
		return err
	}))
	return out, sel
}

// TestEditAppliesInOrderAllOrNothing: a list of edits applies in order —
// a filter sees what the edits before it did — keeps the payload index
// in step, and applies nothing when any edit cannot apply.
func TestEditAppliesInOrderAllOrNothing(t *testing.T) {
	bg := context.Background()
	seed := func() *Memory {
		m := NewMemory(2)
		require.NoError(t, m.Upsert(bg, place, []Record{
			{ID: "a", Vector: []float32{1, 0}, Payload: []byte(`{"color":"red","n":1}`)},
			{ID: "b", Vector: []float32{2, 0}, Payload: []byte(`{"color":"blue"}`)},
			{ID: "c", Vector: []float32{3, 0}},
		}))
		return m
	}
	red := `{"must":[{"key":"color","match":{"value":"red"}}]}`
	for _, tc := range []struct {
		name  string
		edits func(t *testing.T) []Edit
		err   string
		want  map[string]string
		red   []string // what the payload index selects for red after
	}{
		{name: "filter sees an earlier upsert and set", edits: func(t *testing.T) []Edit {
			return []Edit{
				{Kind: EditUpsert, Records: []Record{{ID: "d", Vector: []float32{4, 0}, Payload: []byte(`{"color":"red"}`)}}},
				{Kind: EditSetPayload, IDs: []string{"b"}, Payload: []byte(`{"color":"red","<&>":"x"}`)},
				{Kind: EditSetPayload, Filter: mustFilter(t, red), Payload: []byte(`{"hot":true}`), Path: []string{"m", "k"}},
			}
		}, want: map[string]string{
			"a": `[1 0] {"color":"red","m":{"k":{"hot":true}},"n":1}`,
			"b": `[2 0] {"<&>":"x","color":"red","m":{"k":{"hot":true}}}`,
			"c": `[3 0] `,
			"d": `[4 0] {"color":"red","m":{"k":{"hot":true}}}`,
		}, red: []string{"a", "b", "d"}},
		{name: "delete by filter after an overwrite", edits: func(t *testing.T) []Edit {
			return []Edit{
				{Kind: EditOverwritePayload, IDs: []string{"a"}, Payload: []byte(`{"color":"green"}`)},
				{Kind: EditDelete, Filter: mustFilter(t, `{"must":[{"key":"color","match":{"value":"blue"}}]}`)},
				{Kind: EditUpdateVectors, Records: []Record{{ID: "c", Vector: []float32{5, 5}}}},
				{Kind: EditDeletePayload, Filter: mustFilter(t, `{"must":[{"key":"color","match":{"value":"green"}}]}`), Keys: []string{"color"}},
			}
		}, want: map[string]string{"a": `[1 0] `, "c": `[5 5] `}, red: nil},
		{name: "has_id selects stored and pending points alike", edits: func(t *testing.T) []Edit {
			return []Edit{
				{Kind: EditUpsert, Records: []Record{{ID: "d", Vector: []float32{4, 0}}}},
				{Kind: EditSetPayload, Filter: mustFilter(t, `{"must":[{"has_id":["a","c","d","zz"]}]}`), Payload: []byte(`{"color":"red"}`)},
			}
		}, want: map[string]string{
			"a": `[1 0] {"color":"red","n":1}`,
			"b": `[2 0] {"color":"blue"}`,
			"c": `[3 0] {"color":"red"}`,
			"d": `[4 0] {"color":"red"}`,
		}, red: []string{"a", "c", "d"}},
		{name: "an absent id refuses the whole list", edits: func(t *testing.T) []Edit {
			return []Edit{
				{Kind: EditClearPayload, IDs: []string{"a"}},
				{Kind: EditDelete, IDs: []string{"b"}},
				{Kind: EditSetPayload, IDs: []string{"b"}, Payload: []byte(`{"x":1}`)},
			}
		}, err: "edit 2: no point with id b"},
		{name: "a vector update of an absent id", edits: func(t *testing.T) []Edit {
			return []Edit{{Kind: EditUpdateVectors, Records: []Record{{ID: "a", Vector: []float32{7, 7}}, {ID: "z", Vector: []float32{7, 7}}}}}
		}, err: "edit 0: no point with id z"},
		{name: "a payload over the limits refuses the whole list", edits: func(t *testing.T) []Edit {
			return []Edit{
				{Kind: EditClearPayload, IDs: []string{"b"}},
				{Kind: EditSetPayload, IDs: []string{"a"}, Payload: []byte(`{"big":"` + strings.Repeat("x", filter.MaxPayloadBytes) + `"}`)},
			}
		}, err: "over the 65536-byte limit"},
		{name: "a path too deep refuses the whole list", edits: func(t *testing.T) []Edit {
			return []Edit{{Kind: EditSetPayload, IDs: []string{"a"}, Payload: []byte(`{"x":{"y":1}}`), Path: []string{"1", "2", "3", "4", "5", "6", "7"}}}
		}, err: "edit 0, point a: payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := seed()
			before, beforeRed := docs(t, m, mustFilter(t, red))
			err := m.Edit(bg, place, tc.edits(t))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				var missing *MissingError
				var bad *EditError
				require.True(t, errors.As(err, &missing) || errors.As(err, &bad))
				after, afterRed := docs(t, m, mustFilter(t, red))
				require.Equal(t, before, after, "a refused list changed the store")
				require.Equal(t, beforeRed, afterRed)
				return
			}
			require.NoError(t, err)
			got, gotRed := docs(t, m, mustFilter(t, red))
			require.Equal(t, tc.want, got)
			require.ElementsMatch(t, tc.red, gotRed)
		})
	}
}
