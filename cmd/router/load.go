package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-search/trawl/shard"
)

// loadBatch is the most vectors one POST /v1/vectors takes.
const loadBatch = 256

type loadVector struct {
	ID     string    `json:"id"`
	Vector []float32 `json:"vector"`
}

func runLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	router := fs.String("router", "http://localhost:8080", "router base URL")
	apiKeyFile := fs.String("api-key-file", "", "file holding the router's API key")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: router load --router URL FILE (.npy float32 [N,dim], .fvecs, or .jsonl of {\"id\",\"vector\"})")
	}
	path := fs.Arg(0)
	key := ""
	if *apiKeyFile != "" {
		b, err := os.ReadFile(*apiKeyFile)
		if err != nil {
			return err
		}
		key = strings.TrimSpace(string(b))
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var next func() (loadVector, error)
	var total int
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		next, total, err = npyReader(bufio.NewReader(f))
	case ".fvecs":
		st, serr := f.Stat()
		if serr != nil {
			return serr
		}
		next, total, err = fvecsReader(bufio.NewReader(f), st.Size())
	case ".jsonl", ".ndjson":
		next, total = jsonlReader(bufio.NewReader(f)), -1
	default:
		return fmt.Errorf("%s: unknown format, want .npy, .fvecs or .jsonl", path)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	url := strings.TrimRight(*router, "/") + "/v1/vectors"
	start, done := time.Now(), 0
	batch := make([]loadVector, 0, loadBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := postBatch(ctx, url, key, batch); err != nil {
			return err
		}
		done += len(batch)
		batch = batch[:0]
		progress(done, total, start)
		return nil
	}
	for {
		v, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: record %d: %w", path, done+len(batch), err)
		}
		batch = append(batch, v)
		if len(batch) == loadBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr)
	return nil
}

// progress redraws one status line on stderr.
func progress(done, total int, start time.Time) {
	rate := float64(done) / max(time.Since(start).Seconds(), 1e-9)
	if total > 0 {
		const width = 30
		fill := width * done / total
		fmt.Fprintf(os.Stderr, "\r[%s%s] %d/%d vectors  %.0f/s", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), done, total, rate)
		return
	}
	fmt.Fprintf(os.Stderr, "\r%d vectors  %.0f/s", done, rate)
}

func postBatch(ctx context.Context, url, key string, batch []loadVector) error {
	body, err := json.Marshal(map[string]any{"vectors": batch})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("router answered %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

var npyShape = regexp.MustCompile(`'shape':\s*\((\d+),\s*(\d+)\)`)

// npyReader reads a NumPy .npy file of little-endian float32 [N, dim] in C
// order; ids are row numbers.
func npyReader(r *bufio.Reader) (func() (loadVector, error), int, error) {
	magic := make([]byte, 8)
	if _, err := io.ReadFull(r, magic); err != nil || string(magic[:6]) != "\x93NUMPY" {
		return nil, 0, errors.New("not a .npy file")
	}
	var hlen int
	if magic[6] == 1 {
		var n uint16
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return nil, 0, err
		}
		hlen = int(n)
	} else {
		var n uint32
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return nil, 0, err
		}
		hlen = int(n)
	}
	if hlen > 1<<20 {
		return nil, 0, errors.New(".npy header too large")
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, 0, err
	}
	h := string(header)
	if !strings.Contains(h, "'descr': '<f4'") {
		return nil, 0, fmt.Errorf(".npy dtype must be little-endian float32 ('<f4'): %s", h)
	}
	if strings.Contains(h, "'fortran_order': True") {
		return nil, 0, errors.New(".npy must be C order")
	}
	m := npyShape.FindStringSubmatch(h)
	if m == nil {
		return nil, 0, fmt.Errorf(".npy shape must be 2-D: %s", h)
	}
	n, _ := strconv.Atoi(m[1])
	dim, _ := strconv.Atoi(m[2])
	row := 0
	buf := make([]byte, 4*dim)
	return func() (loadVector, error) {
		if row == n {
			return loadVector{}, io.EOF
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return loadVector{}, fmt.Errorf("truncated .npy: %w", err)
		}
		vec, err := shard.DecodeVector(buf)
		if err != nil {
			return loadVector{}, err
		}
		v := loadVector{ID: strconv.Itoa(row), Vector: vec}
		row++
		return v, nil
	}, n, nil
}

// fvecsReader reads the .fvecs format: each record an int32 dimension then
// that many float32; ids are record numbers.
func fvecsReader(r *bufio.Reader, size int64) (func() (loadVector, error), int, error) {
	head, err := r.Peek(4)
	if err != nil {
		return nil, 0, errors.New("empty .fvecs file")
	}
	dim := int(binary.LittleEndian.Uint32(head))
	if dim < 1 || dim > 1<<16 {
		return nil, 0, fmt.Errorf(".fvecs dimension %d out of range", dim)
	}
	total := int(size / int64(4+4*dim))
	row := 0
	buf := make([]byte, 4*dim)
	return func() (loadVector, error) {
		var d uint32
		if err := binary.Read(r, binary.LittleEndian, &d); err != nil {
			return loadVector{}, io.EOF
		}
		if int(d) != dim {
			return loadVector{}, fmt.Errorf(".fvecs record has dimension %d, the first had %d", d, dim)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return loadVector{}, fmt.Errorf("truncated .fvecs: %w", err)
		}
		vec, err := shard.DecodeVector(buf)
		if err != nil {
			return loadVector{}, err
		}
		v := loadVector{ID: strconv.Itoa(row), Vector: vec}
		row++
		return v, nil
	}, total, nil
}

func jsonlReader(r *bufio.Reader) func() (loadVector, error) {
	dec := json.NewDecoder(r)
	return func() (loadVector, error) {
		var v loadVector
		if err := dec.Decode(&v); err != nil {
			return loadVector{}, err
		}
		return v, nil
	}
}
