package qdrant

import (
	"fmt"
	"net/http"

	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
)

// routeParams are a Qdrant route's query parameters: trawl's deadline_ms,
// shard_detail and allow_partial, and Qdrant's timeout (seconds, onto
// the deadline), wait, ordering and consistency (accepted; see README).
type routeParams struct {
	budget       budget.Budget
	detail       bool
	allowPartial bool
}

func (h *Handler) routeParams(r *http.Request) (routeParams, error) {
	q := r.URL.Query()
	b, err := budget.ResolveTimeout(h.cfg.Budget, q["deadline_ms"], q["timeout"])
	if err != nil {
		return routeParams{}, wire.Invalid(err.Error())
	}
	p := routeParams{budget: b}
	if p.detail, err = httpx.BoolParam(q, "shard_detail", false); err != nil {
		return routeParams{}, err
	}
	if p.allowPartial, err = httpx.BoolParam(q, "allow_partial", true); err != nil {
		return routeParams{}, err
	}
	if _, err := httpx.BoolParam(q, "wait", true); err != nil {
		return routeParams{}, err
	}
	if v := q.Get("ordering"); v != "" && v != "weak" && v != "medium" && v != "strong" {
		return routeParams{}, wire.Invalid(fmt.Sprintf("ordering is %q, want weak, medium or strong", v))
	}
	return p, nil
}

// decodeRequest checks the query parameters, reads the body and decodes
// it; false once it has answered (a bad parameter, a body too large or
// too slow, or one decode refuses).
func decodeRequest[T any](h *Handler, w http.ResponseWriter, r *http.Request, decode func([]byte) (T, error)) (T, routeParams, bool) {
	var v T
	p, err := h.routeParams(r)
	var body []byte
	if err == nil {
		body, err = h.http.ReadBody(w, r)
	}
	if err == nil {
		v, err = decode(body)
	}
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return v, p, false
	}
	return v, p, true
}

// schema is the route's collection's, for the decoders that check
// vectors.
func schema(r *http.Request) coordinator.Schema { return coll(r).Schema() }
