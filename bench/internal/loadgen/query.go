// Package loadgen drives a trawl router with k-NN searches, open loop
// (vegeta at a fixed arrival rate, so a slow answer cannot delay the next
// request and hide queueing) or closed loop (N clients, each sending its
// next query when the last one is answered), and summarises the answers
// with HdrHistogram percentiles.
package loadgen

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// Encoding is how a query's vector travels in the request body.
type Encoding string

const (
	// B64 sends "vector_b64": base64 of little-endian float32.
	B64 Encoding = "b64"
	// JSON sends "vector": a JSON array of numbers.
	JSON Encoding = "json"
)

// ParseEncoding accepts "b64" or "json".
func ParseEncoding(s string) (Encoding, error) {
	switch e := Encoding(s); e {
	case B64, JSON:
		return e, nil
	}
	return "", fmt.Errorf("encoding %q: want b64 or json", s)
}

// RandomVector is a Gaussian vector of dim dimensions: never zero, so
// cosine accepts it, and with no structure a shard could exploit.
func RandomVector(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// LittleEndian is v as little-endian float32 bytes, the shards' wire form.
func LittleEndian(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// Body is the JSON body of one POST /v1/search for v.
func Body(v []float32, k int, enc Encoding) ([]byte, error) {
	switch enc {
	case B64:
		return json.Marshal(struct {
			VectorB64 string `json:"vector_b64"`
			K         int    `json:"k"`
		}{base64.StdEncoding.EncodeToString(LittleEndian(v)), k})
	case JSON:
		return json.Marshal(struct {
			Vector []float32 `json:"vector"`
			K      int       `json:"k"`
		}{v, k})
	}
	return nil, fmt.Errorf("encoding %q: want b64 or json", enc)
}

// Queries is a pool of distinct query vectors and their bodies, made
// before a run so building requests costs the generator nothing.
type Queries struct {
	Vectors [][]float32
	Bodies  [][]byte
}

// NewQueries makes n random queries of dim dimensions, top-k, seeded so
// two runs (trawl and its baseline) send the same queries.
func NewQueries(n, dim, k int, enc Encoding, seed uint64) (*Queries, error) {
	rng := rand.New(rand.NewPCG(seed, 0x7261776c))
	q := &Queries{}
	for range n {
		v := RandomVector(rng, dim)
		b, err := Body(v, k, enc)
		if err != nil {
			return nil, err
		}
		q.Vectors = append(q.Vectors, v)
		q.Bodies = append(q.Bodies, b)
	}
	return q, nil
}
