package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
)

// WriteNpy writes rows random Gaussian vectors of dim float32 as a NumPy
// .npy file (format 1.0), the input `router load` takes.
func WriteNpy(path string, rows, dim int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x636f7270))
	return writeNpy(path, rows, dim, func(_ int, row []float32) {
		for j := range row {
			row[j] = float32(rng.NormFloat64())
		}
	})
}

// WriteNpyRows writes data (rows of dim float32, row-major) as a .npy
// file.
func WriteNpyRows(path string, data []float32, dim int) error {
	return writeNpy(path, len(data)/dim, dim, func(i int, row []float32) {
		copy(row, data[i*dim:(i+1)*dim])
	})
}

// writeNpy writes a .npy file of rows × dim float32, row i filled by fill.
func writeNpy(path string, rows, dim int, fill func(i int, row []float32)) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, dim)
	// The header is padded so the data starts on a 64-byte boundary.
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	w.WriteString("\x93NUMPY\x01\x00")
	binary.Write(w, binary.LittleEndian, uint16(len(hdr)))
	w.WriteString(hdr)
	v := make([]float32, dim)
	row := make([]byte, 4*dim)
	for i := range rows {
		fill(i, v)
		for j, x := range v {
			binary.LittleEndian.PutUint32(row[4*j:], math.Float32bits(x))
		}
		w.Write(row)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("corpus: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	return nil
}

// Load imports file through the router with `router load` and returns its
// output (the summary line has the rate).
func (c *Cluster) Load(ctx context.Context, r *Router, file string) (string, error) {
	out, err := exec.CommandContext(ctx, c.cfg.Bin, "load", "--router", r.Base, file).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("router load: %w\n%s", err, out)
	}
	return string(out), nil
}
