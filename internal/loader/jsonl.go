package loader

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// maxLine bounds one JSON Lines record: an 8 MiB request body could not
// carry a longer one anyway.
const maxLine = 8 << 20

// jsonl reads JSON Lines, one {"id", "vector", "payload"} object a line.
// Blank lines are not records.
type jsonl struct {
	sc   *bufio.Scanner
	line int   // the last line read, from 1
	row  int64 // the next record's offset
}

// NewJSONL reads JSON Lines: each non-blank line one object with "id" (a
// string, or an integer taken as its decimal text), "vector" (an array of
// numbers) and an optional "payload" object, passed on verbatim.
func NewJSONL(r io.Reader) Source {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	return &jsonl{sc: sc}
}

func (s *jsonl) Total() int64 { return -1 }

// next returns the next non-blank line.
func (s *jsonl) next() ([]byte, error) {
	for s.sc.Scan() {
		s.line++
		if b := bytes.TrimSpace(s.sc.Bytes()); len(b) > 0 {
			return b, nil
		}
	}
	if err := s.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d bytes", s.line+1, maxLine)
		}
		return nil, fmt.Errorf("line %d: %w", s.line+1, err)
	}
	return nil, io.EOF
}

func (s *jsonl) Skip(n int64) error {
	for i := int64(0); i < n; i++ {
		if _, err := s.next(); err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("cannot skip %d records: the JSON Lines input has %d", n, s.row)
			}
			return err
		}
		s.row++
	}
	return nil
}

func (s *jsonl) Next() (Record, error) {
	b, err := s.next()
	if err != nil {
		return Record{}, err
	}
	rec, err := decodeLine(b)
	if err != nil {
		return Record{}, fmt.Errorf("line %d (record %d): %w", s.line, s.row, err)
	}
	s.row++
	return rec, nil
}

type lineJSON struct {
	ID      json.RawMessage `json:"id"`
	Vector  []float32       `json:"vector"`
	Payload json.RawMessage `json:"payload"`
}

// decodeLine decodes one JSON Lines record. Unknown fields are refused, so
// a misspelt "vectors" or "payloads" is an error rather than a record
// stored without it.
func decodeLine(b []byte) (Record, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l lineJSON
	if err := dec.Decode(&l); err != nil {
		return Record{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Record{}, errors.New("data after the JSON object")
	}
	id, err := lineID(l.ID)
	if err != nil {
		return Record{}, err
	}
	if len(l.Vector) == 0 {
		return Record{}, errors.New(`missing or empty "vector"`)
	}
	vec := make([]byte, 0, 4*len(l.Vector))
	for _, f := range l.Vector {
		vec = binary.LittleEndian.AppendUint32(vec, math.Float32bits(f))
	}
	rec := Record{ID: id, Vector: vec}
	switch p := bytes.TrimSpace(l.Payload); {
	case len(p) == 0 || string(p) == "null":
	case p[0] == '{':
		rec.Payload = p
	default:
		return Record{}, errors.New(`"payload" must be a JSON object`)
	}
	return rec, nil
}

// lineID is "id" as the router wants it: a string, or an integer (as
// Qdrant point ids are) in its canonical decimal form.
func lineID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New(`missing "id"`)
	}
	var id string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &id); err != nil {
			return "", fmt.Errorf(`"id": %w`, err)
		}
	} else {
		n, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			return "", fmt.Errorf(`"id" must be a string or a non-negative integer, not %s`, raw)
		}
		id = strconv.FormatUint(n, 10)
	}
	if id == "" {
		return "", errors.New(`empty "id"`)
	}
	return id, nil
}
