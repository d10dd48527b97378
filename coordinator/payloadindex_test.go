package coordinator

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPayloadIndexDeclarations(t *testing.T) {
	var c Coordinator
	ctx := context.Background()
	notes := Collection{Name: "notes", UID: 7, PayloadSchema: map[string]string{"from_catalog": "integer"}}

	require.Equal(t, notes, c.withPayloadSchema(notes), "nothing declared: as the catalog says")
	require.NoError(t, c.SetPayloadIndex(ctx, notes, "color", "keyword"))
	require.NoError(t, c.SetPayloadIndex(ctx, notes, "n", "integer"))
	require.NoError(t, c.SetPayloadIndex(ctx, notes, "n", "float"), "a second declaration replaces the first")
	got := c.withPayloadSchema(notes)
	require.Equal(t, map[string]string{"from_catalog": "integer", "color": "keyword", "n": "float"}, got.PayloadSchema)
	got.PayloadSchema["x"] = "bool"
	require.Equal(t, map[string]string{"from_catalog": "integer"}, notes.PayloadSchema, "answers are copies")

	require.NoError(t, c.DropPayloadIndex(ctx, notes, "color"))
	require.NoError(t, c.DropPayloadIndex(ctx, notes, "never"))
	require.Equal(t, map[string]string{"from_catalog": "integer", "n": "float"}, c.withPayloadSchema(notes).PayloadSchema)

	again := Collection{Name: "notes", UID: 9}
	require.Nil(t, c.withPayloadSchema(again).PayloadSchema, "a re-created collection starts with none")
	require.Equal(t, CodeInvalid, CodeOf(c.SetPayloadIndex(ctx, notes, "", "keyword")))
}

func TestPayloadIndexConcurrent(t *testing.T) {
	var c Coordinator
	coll := Collection{Name: "c", UID: 1}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			field := string(rune('a' + i))
			require.NoError(t, c.SetPayloadIndex(context.Background(), coll, field, "keyword"))
			_ = c.withPayloadSchema(coll)
		})
	}
	wg.Wait()
	require.Len(t, c.withPayloadSchema(coll).PayloadSchema, 8)
}
