package qdrant

import (
	"errors"
	"net/http"
	"testing"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
)

// FuzzDecodeEdits: every edit decoder either refuses a body with a 400
// or returns edits a shard can apply as they are: a known kind, exactly
// one selection (ids, or a filter with conditions) where one is needed,
// payloads within the limits, vectors of the collection's dimension.
func FuzzDecodeEdits(f *testing.F) {
	for _, s := range []string{
		`{"payload": {"a": 1}, "points": [1, "8a1e0c4a-7b4f-4c1e-9d2a-0123456789ab"]}`,
		`{"payload": {"a": {"b": [1, 2]}}, "filter": {"must": [{"key": "a", "match": {"value": 1}}]}, "key": "x.y"}`,
		`{"payload": {"a": 1}}`, `{"payload": {"a": 1}, "points": [1], "filter": {"must": []}}`,
		`{"payload": {"a": 1}, "points": [1], "key": "a[0]"}`, `{"payload": [], "points": [1]}`,
		`{"keys": ["a", "b"], "points": [1]}`, `{"keys": ["a.b"], "filter": {"must": [{"is_empty": {"key": "a"}}]}}`,
		`{"points": [2]}`, `{"filter": {}}`, `{"points": [{"id": 1, "vector": [1, 0]}]}`,
		`{"points": [{"id": 1, "vector": [0, 0]}]}`, `{"points": [{"id": 1, "vector": {"": [1, 2]}}]}`,
		`{"points": [1], "vector": [""]}`,
		`{"operations": [{"upsert": {"points": [{"id": 3, "vector": [1, 2], "payload": {"c": "r"}}]}}, {"delete": {"points": [3]}}]}`,
		`{"operations": [{"set_payload": {"payload": {"a": 1}, "points": [1]}}, {"overwrite_payload": {"payload": {}, "points": [1]}},
		  {"delete_payload": {"keys": ["a"], "points": [1]}}, {"clear_payload": {"points": [1]}},
		  {"update_vectors": {"points": [{"id": 1, "vector": [3, 4]}]}}]}`,
		`{"operations": [{}]}`, `{"operations": [{"nope": {}}]}`, ``, `{}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	sch := coordinator.Schema{Dim: 2, Metric: vector.Cosine}
	decoders := []func([]byte) ([]coordinator.Edit, error){
		func(b []byte) ([]coordinator.Edit, error) { return single(decodeSetPayload(b, false)) },
		func(b []byte) ([]coordinator.Edit, error) { return single(decodeSetPayload(b, true)) },
		func(b []byte) ([]coordinator.Edit, error) { return single(decodeDeletePayload(b)) },
		func(b []byte) ([]coordinator.Edit, error) { return single(decodeClearPayload(b)) },
		func(b []byte) ([]coordinator.Edit, error) { return single(decodeUpdateVectors(b, sch)) },
		func(b []byte) ([]coordinator.Edit, error) { return single(decodeDeleteVectors(b, sch)) },
		func(b []byte) ([]coordinator.Edit, error) { return decodeUpdateBatch(b, sch) },
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, decode := range decoders {
			edits, err := decode(b)
			if err != nil {
				var we *wire.Error
				if !errors.As(err, &we) || we.Status != http.StatusBadRequest {
					t.Fatalf("error %v (%T), want a 400", err, err)
				}
				continue
			}
			if len(edits) < 1 || len(edits) > coordinator.MaxEdits {
				t.Fatalf("%d edits accepted", len(edits))
			}
			for _, e := range edits {
				requireApplicable(t, sch, e)
			}
		}
	})
}

func requireApplicable(t *testing.T, sch coordinator.Schema, e coordinator.Edit) {
	t.Helper()
	switch e.Kind {
	case coordinator.EditUpsert, coordinator.EditUpdateVectors:
		if len(e.Points) == 0 || len(e.IDs) > 0 || e.Filter != nil {
			t.Fatalf("%v: %d points, %d ids, filter %v", e.Kind, len(e.Points), len(e.IDs), e.Filter)
		}
		for _, p := range e.Points {
			if p.ID == "" || len(p.Vector) != sch.Dim {
				t.Fatalf("%v: point %q with %d dimensions", e.Kind, p.ID, len(p.Vector))
			}
			if e.Kind == coordinator.EditUpdateVectors && p.Payload != nil {
				t.Fatalf("a vector update with a payload")
			}
		}
		return
	case coordinator.EditDelete, coordinator.EditSetPayload, coordinator.EditOverwritePayload,
		coordinator.EditDeletePayload, coordinator.EditClearPayload:
	default:
		t.Fatalf("edit kind %d", e.Kind)
	}
	if (len(e.IDs) > 0) == (e.Filter != nil) || (e.Filter != nil && e.Filter.Empty()) {
		t.Fatalf("%v: %d ids and filter %v", e.Kind, len(e.IDs), e.Filter)
	}
	for _, id := range e.IDs {
		if id == "" {
			t.Fatalf("empty id")
		}
	}
	switch e.Kind {
	case coordinator.EditSetPayload, coordinator.EditOverwritePayload:
		if _, err := filter.CheckPayload(e.Payload); err != nil {
			t.Fatalf("payload %s: %v", e.Payload, err)
		}
		if _, err := filter.PayloadPath(e.Key); err != nil {
			t.Fatalf("key: %v", err)
		}
	case coordinator.EditDeletePayload:
		if len(e.Keys) == 0 {
			t.Fatalf("a payload delete without keys")
		}
	}
}
