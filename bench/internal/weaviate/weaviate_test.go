package weaviate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestUUIDRoundTrip(t *testing.T) {
	for _, i := range []int{0, 1, 99_999, 1 << 40} {
		u := UUID(i)
		if len(u) != 36 || Row(u) != i {
			t.Fatalf("UUID(%d) = %q, Row = %d", i, u, Row(u))
		}
	}
	if Row("not-a-uuid-x") != -1 {
		t.Fatal("Row of a foreign id")
	}
}

func TestSearchBodyIsGraphQL(t *testing.T) {
	var q map[string]string
	if err := json.Unmarshal(SearchBody("PeerHnsw", []float32{0.5, -1e-7, 1}, 10), &q); err != nil {
		t.Fatal(err)
	}
	want := "{Get{PeerHnsw(nearVector:{vector:[0.5,-1e-07,1]},limit:10){_additional{id}}}}"
	if q["query"] != want {
		t.Fatalf("query %q, want %q", q["query"], want)
	}
	if strings.Contains(q["query"], "NaN") {
		t.Fatal("NaN in a query")
	}
}
