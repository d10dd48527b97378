package qdrant

import (
	"net/http"
	"time"

	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
)

// Point edits: payload and vector updates and points/batch. Each decodes
// into coordinator.Edits and goes through Coordinator.Edit, as the gRPC
// twins do; answered once committed, so wait=false is answered completed
// too.

func (h *Handler) setPayload(w http.ResponseWriter, r *http.Request) {
	h.edit(w, r, false, func(b []byte) ([]coordinator.Edit, error) { return single(decodeSetPayload(b, false)) })
}

func (h *Handler) overwritePayload(w http.ResponseWriter, r *http.Request) {
	h.edit(w, r, false, func(b []byte) ([]coordinator.Edit, error) { return single(decodeSetPayload(b, true)) })
}

func (h *Handler) deletePayload(w http.ResponseWriter, r *http.Request) {
	h.edit(w, r, false, func(b []byte) ([]coordinator.Edit, error) { return single(decodeDeletePayload(b)) })
}

func (h *Handler) clearPayload(w http.ResponseWriter, r *http.Request) {
	h.edit(w, r, false, func(b []byte) ([]coordinator.Edit, error) { return single(decodeClearPayload(b)) })
}

func (h *Handler) updateVectors(w http.ResponseWriter, r *http.Request) {
	h.edit(w, r, false, func(b []byte) ([]coordinator.Edit, error) { return single(decodeUpdateVectors(b, schema(r))) })
}

func (h *Handler) deleteVectors(w http.ResponseWriter, r *http.Request) {
	h.edit(w, r, false, func(b []byte) ([]coordinator.Edit, error) { return single(decodeDeleteVectors(b, schema(r))) })
}

// batchUpdate answers, as Qdrant does, one result per operation.
func (h *Handler) batchUpdate(w http.ResponseWriter, r *http.Request) {
	h.edit(w, r, true, func(b []byte) ([]coordinator.Edit, error) { return decodeUpdateBatch(b, schema(r)) })
}

func single(e coordinator.Edit, err error) ([]coordinator.Edit, error) {
	if err != nil {
		return nil, err
	}
	return []coordinator.Edit{e}, nil
}

// edit decodes a body into edits and applies them. A batch (one edit an
// operation) is answered a result per operation, any other edit one.
func (h *Handler) edit(w http.ResponseWriter, r *http.Request, batch bool, decode func([]byte) ([]coordinator.Edit, error)) {
	edits, _, ok := decodeRequest(h, w, r, decode)
	if !ok {
		return
	}
	start := time.Now()
	permit := h.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	results, err := h.cfg.Coordinator.Edit(r.Context(), coll(r), edits)
	permit.Done(time.Since(start), false)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	if werr := qdrantx.EditFailure(results); werr != nil {
		h.http.Error(w, r, werr)
		return
	}
	if !batch {
		answer(w, r, updateResult{Status: "completed"}, nil)
		return
	}
	out := make([]updateResult, len(edits))
	for i := range out {
		out[i].Status = "completed"
	}
	answer(w, r, out, nil)
}
