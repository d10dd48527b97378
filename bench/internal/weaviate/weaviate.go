// Package weaviate runs a Weaviate server on loopback (the binary built
// from tools/weaviate) and talks to it over its REST and GraphQL API:
// create a class, import vectors with explicit ids, wait for indexing,
// search by nearVector. It is the peer side of `trawlbench peer`.
package weaviate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
)

// Server is one weaviate-server process.
type Server struct {
	cluster.Proc
	Base string // http://127.0.0.1:PORT
	hc   *http.Client
}

// Start runs bin with its data under dir and waits for
// /v1/.well-known/ready. Every port it opens is chosen below the
// ephemeral range (cluster.FreePort), so two runs on a shared machine do
// not clash on Weaviate's fixed defaults (8080, 50051, 7946, 8300, 6060).
func Start(ctx context.Context, bin, dir, log string) (*Server, error) {
	ports := make([]string, 7)
	for i := range ports {
		a, err := cluster.FreePort()
		if err != nil {
			return nil, err
		}
		_, p, _ := net.SplitHostPort(a)
		ports[i] = p
	}
	httpPort, grpcPort, gossip, data, raft, raftRPC, prof := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], ports[6]
	s := &Server{Base: "http://127.0.0.1:" + httpPort, hc: &http.Client{Timeout: 5 * time.Minute}}
	s.Proc = cluster.Proc{Name: "weaviate", Bin: bin, Log: log,
		Args: []string{"--host", "127.0.0.1", "--port", httpPort, "--scheme", "http"},
		Env: []string{
			"PERSISTENCE_DATA_PATH=" + dir,
			"DEFAULT_VECTORIZER_MODULE=none",
			"ENABLE_MODULES=",
			"AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true",
			"DISABLE_TELEMETRY=true",
			"CLUSTER_HOSTNAME=peer4-node1",
			// Without an advertise address Weaviate picks the host's
			// first address; on an IPv6 one (fd00::2 here) its raft RPC
			// listener fails ("listen tcp: address fd00::2:PORT: too many
			// colons in address"). CLUSTER_IN_LOCALHOST=true kept the
			// one-node raft from ever electing itself ("no known peers").
			"CLUSTER_BIND_ADDR=127.0.0.1",
			"CLUSTER_ADVERTISE_ADDR=127.0.0.1",
			"CLUSTER_GOSSIP_BIND_PORT=" + gossip,
			"CLUSTER_DATA_BIND_PORT=" + data,
			"RAFT_PORT=" + raft,
			"RAFT_INTERNAL_RPC_PORT=" + raftRPC,
			"RAFT_BOOTSTRAP_EXPECT=1",
			"GRPC_PORT=" + grpcPort,
			"GO_PROFILING_PORT=" + prof,
			"QUERY_DEFAULTS_LIMIT=10",
			"LOG_LEVEL=warning",
		}}
	if err := s.Start(); err != nil {
		return nil, err
	}
	if err := cluster.WaitReady(ctx, &s.Proc, s.Base+"/v1/.well-known/ready", 3*time.Minute); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

// do sends a JSON request and decodes a JSON answer into out (when not
// nil); any status but 2xx is an error carrying the body.
func (s *Server) do(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.Base+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("weaviate %s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("weaviate %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("weaviate %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("weaviate %s %s: %s: %.500s", method, path, resp.Status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("weaviate %s %s: %w: %.200s", method, path, err, raw)
		}
	}
	return nil
}

// CreateClass makes a class without a vectorizer (vectors come with the
// objects), of distance ("cosine" or "l2-squared", Weaviate's names), the
// given index type ("hnsw" or "flat") at Weaviate's defaults otherwise,
// over shards shards.
func (s *Server) CreateClass(ctx context.Context, name, indexType, distance string, shards int) error {
	b, err := json.Marshal(map[string]any{
		"class":             name,
		"vectorizer":        "none",
		"vectorIndexType":   indexType,
		"vectorIndexConfig": map[string]any{"distance": distance},
		"shardingConfig":    map[string]any{"desiredCount": shards},
		"properties":        []any{},
	})
	if err != nil {
		return err
	}
	return s.do(ctx, http.MethodPost, "/v1/schema", b, nil)
}

// UUID is document i's Weaviate id: a fixed version-4 shape with i in its
// last 48 bits, so an answer maps back to the row without a table.
func UUID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i) }

// Row is the row number UUID encoded, or -1.
func Row(uuid string) int {
	i := strings.LastIndexByte(uuid, '-')
	n, err := strconv.ParseInt(uuid[i+1:], 16, 64)
	if i < 0 || err != nil {
		return -1
	}
	return int(n)
}

// appendVector writes v as a JSON array of float32s in their shortest
// form.
func appendVector(b []byte, v []float32) []byte {
	b = append(b, '[')
	for j, x := range v {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']')
}

// Import sends rows of data (row-major, dim each) to class through
// /v1/batch/objects, batch objects a request and concurrency requests at
// once; any object Weaviate reports as failed fails the import.
func (s *Server) Import(ctx context.Context, class string, data []float32, dim, batch, concurrency int) error {
	rows := len(data) / dim
	next := make(chan int)
	errc := make(chan error, concurrency)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range concurrency {
		wg.Go(func() {
			for start := range next {
				if err := s.importBatch(ctx, class, data, dim, start, min(rows, start+batch)); err != nil {
					errc <- err
					cancel()
					return
				}
			}
		})
	}
	go func() {
		defer close(next)
		for start := 0; start < rows; start += batch {
			select {
			case next <- start:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	return ctx.Err()
}

func (s *Server) importBatch(ctx context.Context, class string, data []float32, dim, from, to int) error {
	b := []byte(`{"objects":[`)
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"class":%q,"id":%q,"properties":{},"vector":`, class, UUID(i))
		b = appendVector(b, data[i*dim:(i+1)*dim])
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	var out []struct {
		ID     string `json:"id"`
		Result struct {
			Errors *struct {
				Error []struct {
					Message string `json:"message"`
				} `json:"error"`
			} `json:"errors"`
		} `json:"result"`
	}
	if err := s.do(ctx, http.MethodPost, "/v1/batch/objects", b, &out); err != nil {
		return fmt.Errorf("import rows %d..%d: %w", from, to, err)
	}
	if len(out) != to-from {
		return fmt.Errorf("import rows %d..%d: %d results", from, to, len(out))
	}
	for _, o := range out {
		if e := o.Result.Errors; e != nil && len(e.Error) > 0 {
			return fmt.Errorf("import %s: %s", o.ID, e.Error[0].Message)
		}
	}
	return nil
}

// Count is the class's object count (GraphQL Aggregate).
func (s *Server) Count(ctx context.Context, class string) (int, error) {
	b, _ := json.Marshal(map[string]string{"query": fmt.Sprintf("{Aggregate{%s{meta{count}}}}", class)})
	var out struct {
		Data struct {
			Aggregate map[string][]struct {
				Meta struct {
					Count int `json:"count"`
				} `json:"meta"`
			} `json:"Aggregate"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := s.do(ctx, http.MethodPost, "/v1/graphql", b, &out); err != nil {
		return 0, err
	}
	if len(out.Errors) > 0 {
		return 0, fmt.Errorf("weaviate count %s: %s", class, out.Errors[0].Message)
	}
	a := out.Data.Aggregate[class]
	if len(a) == 0 {
		return 0, fmt.Errorf("weaviate count %s: no answer", class)
	}
	return a[0].Meta.Count, nil
}

// WaitIndexed waits until class holds rows objects and every shard of it
// reports its vector index READY with an empty indexing queue
// (/v1/nodes?output=verbose).
func (s *Server) WaitIndexed(ctx context.Context, class string, rows int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		n, err := s.Count(ctx, class)
		if err == nil && n == rows {
			var nodes struct {
				Nodes []struct {
					Shards []struct {
						Class                string `json:"class"`
						VectorIndexingStatus string `json:"vectorIndexingStatus"`
						VectorQueueLength    int    `json:"vectorQueueLength"`
					} `json:"shards"`
				} `json:"nodes"`
			}
			if err = s.do(ctx, http.MethodGet, "/v1/nodes?output=verbose", nil, &nodes); err == nil {
				ready, seen := true, 0
				for _, nd := range nodes.Nodes {
					for _, sh := range nd.Shards {
						if sh.Class != class {
							continue
						}
						seen++
						if sh.VectorIndexingStatus != "READY" || sh.VectorQueueLength > 0 {
							ready = false
							last = fmt.Sprintf("shard status %s, queue %d", sh.VectorIndexingStatus, sh.VectorQueueLength)
						}
					}
				}
				if ready && seen > 0 {
					return nil
				}
			}
		}
		if err != nil {
			last = err.Error()
		} else if n != rows {
			last = fmt.Sprintf("%d of %d objects", n, rows)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("weaviate %s not indexed after %s (%s): %w", class, timeout, last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// SearchBody is the GraphQL request for the k nearest objects of class to
// v, asking only for their ids.
func SearchBody(class string, v []float32, k int) []byte {
	q := fmt.Appendf(nil, "{Get{%s(nearVector:{vector:", class)
	q = appendVector(q, v)
	q = fmt.Appendf(q, "},limit:%d){_additional{id}}}}", k)
	b, _ := json.Marshal(map[string]string{"query": string(q)})
	return b
}

// Search sends a body made by SearchBody for class and returns the
// answer's ids in rank order.
func (s *Server) Search(ctx context.Context, hc *http.Client, class string, body []byte) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Base+"/v1/graphql", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("weaviate search: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("weaviate search: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("weaviate search: %s: %.300s", resp.Status, raw)
	}
	var out struct {
		Data struct {
			Get map[string][]struct {
				Additional struct {
					ID string `json:"id"`
				} `json:"_additional"`
			} `json:"Get"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("weaviate search: %w", err)
	}
	if len(out.Errors) > 0 {
		return nil, fmt.Errorf("weaviate search: %s", out.Errors[0].Message)
	}
	hits := out.Data.Get[class]
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.Additional.ID
	}
	return ids, nil
}
