package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

type writeResult struct {
	ID      string     `json:"id"`
	Status  string     `json:"status"`
	Outcome string     `json:"outcome,omitempty"`
	Error   *errorBody `json:"error,omitempty"`
}

type writeResponse struct {
	Results []writeResult `json:"results"`
}

// retryNote ends every write error: upserts are keyed, so a retry is safe.
const retryNote = " Upserts are keyed by id, so retrying the request is safe."

func (s *Server) upsert(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	recs, err := decodeWrite(body, *s.schema.Load())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	byShard := map[string][]int{}
	for i, rec := range recs {
		home := s.placement.Home(rec.id)
		byShard[home] = append(byShard[home], i)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), shard.WriteTimeout)
	defer cancel()
	results := make([]writeResult, len(recs))
	var wg sync.WaitGroup
	for name, idx := range byShard {
		wg.Go(func() {
			vs := make([]*shardpb.Vector, len(idx))
			for j, i := range idx {
				vs[j] = &shardpb.Vector{Id: recs[i].id, Vector: shard.EncodeVector(recs[i].vector)}
			}
			p := shard.Placement{Fingerprint: s.placement.Fingerprint(), Shard: name}
			wr, err := fanout.Broadcast(ctx, s.cfg.Cluster, name, func(ctx context.Context, c *shard.Conn) error {
				_, err := c.Upsert(ctx, p, vs)
				return err
			})
			res := shardWriteResult(name, wr, err)
			for _, i := range idx {
				res.ID = recs[i].id
				results[i] = res
			}
		})
	}
	wg.Wait()
	writeJSON(w, writeStatus(results), writeResponse{Results: results})
}

// shardWriteResult folds the replicas' outcomes into the result every id of
// that shard gets: ok only when every replica acknowledged; unknown when
// any replica may have applied it; otherwise failed.
func shardWriteResult(name string, wr []fanout.WriteResult, err error) writeResult {
	if err != nil {
		return writeResult{Status: "error", Outcome: fanout.WriteFailed, Error: &errorBody{Code: codeInternal, Message: err.Error()}}
	}
	var unknown, failed []string
	code := codeUnavailable
	for _, x := range wr {
		switch x.Outcome {
		case fanout.WriteUnknown:
			unknown = append(unknown, fmt.Sprintf("%s: %v", x.Replica, status.Convert(x.Err).Message()))
		case fanout.WriteFailed:
			failed = append(failed, fmt.Sprintf("%s: %v", x.Replica, status.Convert(x.Err).Message()))
			switch status.Code(x.Err) {
			case codes.FailedPrecondition:
				code = codeConflict
			case codes.InvalidArgument, codes.Internal:
				code = codeInternal
			}
		}
	}
	switch {
	case len(unknown) > 0:
		return writeResult{Status: "error", Outcome: fanout.WriteUnknown, Error: &errorBody{Code: codeUnknown,
			Message: fmt.Sprintf("shard %s: the write may or may not have been applied on %s.%s",
				name, strings.Join(append(unknown, failed...), "; "), retryNote)}}
	case len(failed) > 0:
		return writeResult{Status: "error", Outcome: fanout.WriteFailed, Error: &errorBody{Code: code,
			Message: fmt.Sprintf("shard %s: not acknowledged by every replica (%s).%s", name, strings.Join(failed, "; "), retryNote)}}
	}
	return writeResult{Status: "ok"}
}

// writeStatus is 200 when every id is ok; 502 when any outcome is unknown;
// else the status of the first failure's code.
func writeStatus(results []writeResult) int {
	st := http.StatusOK
	for _, r := range results {
		if r.Error == nil {
			continue
		}
		switch r.Error.Code {
		case codeUnknown:
			return http.StatusBadGateway
		case codeConflict:
			st = http.StatusConflict
		case codeInternal:
			if st == http.StatusOK {
				st = http.StatusInternalServerError
			}
		default:
			if st == http.StatusOK {
				st = http.StatusServiceUnavailable
			}
		}
	}
	return st
}

type getResponse struct {
	ID     string    `json:"id"`
	Vector []float32 `json:"vector"`
	Shard  string    `json:"shard"`
}

// pathID is the {id} of /v1/vectors/{id}, unescaped. chi matches on the
// raw path when the client escaped more than Go would (encodeURIComponent
// sends user%3A42), and then hands back the escaped segment.
func pathID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		u, err := url.PathUnescape(id)
		if err != nil {
			return "", invalid(fmt.Sprintf("id %q is not a valid escaped path segment", id))
		}
		id = u
	}
	if err := checkID(id); err != nil {
		return "", invalid(err.Error())
	}
	return id, nil
}

func (s *Server) getVector(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := s.params(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(r.Context()), start.Add(p.budget.Shard))
	defer cancel()
	v, err := s.lookup(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, getResponse{ID: id, Vector: v, Shard: s.placement.Home(id)})
}

type deleteResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (s *Server) deleteVector(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	home := s.placement.Home(id)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), shard.WriteTimeout)
	defer cancel()
	p := shard.Placement{Fingerprint: s.placement.Fingerprint(), Shard: home}
	var mu sync.Mutex
	found := false
	wr, err := fanout.Broadcast(ctx, s.cfg.Cluster, home, func(ctx context.Context, c *shard.Conn) error {
		f, _, err := c.Delete(ctx, p, id)
		mu.Lock()
		found = found || f
		mu.Unlock()
		return err
	})
	res := shardWriteResult(home, wr, err)
	if res.Error != nil {
		res.ID = id
		writeJSON(w, writeStatus([]writeResult{res}), res)
		return
	}
	st := "ok"
	if !found {
		st = "not_found"
	}
	writeJSON(w, http.StatusOK, deleteResponse{ID: id, Status: st})
}
