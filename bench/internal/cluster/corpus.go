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
	"time"
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

// writeNpy writes a .npy file of rows × dim float32, row i filled by fill.
func writeNpy(path string, rows, dim int, fill func(i int, row []float32)) error {
	w, err := CreateNpy(path, rows, dim)
	if err != nil {
		return err
	}
	v := make([]float32, dim)
	for i := range rows {
		fill(i, v)
		if err := w.Write(v); err != nil {
			w.f.Close()
			return err
		}
	}
	return w.Close()
}

// NpyWriter writes a .npy file (format 1.0) of float32 rows in order,
// for corpora too large to hold in memory.
type NpyWriter struct {
	f         *os.File
	w         *bufio.Writer
	dim       int
	rows, got int
	buf       []byte
}

// CreateNpy starts a .npy file of rows × dim float32.
func CreateNpy(path string, rows, dim int) (*NpyWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
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
	return &NpyWriter{f: f, w: w, dim: dim, rows: rows}, nil
}

// Write appends whole rows (row-major).
func (n *NpyWriter) Write(data []float32) error {
	if len(data)%n.dim != 0 || n.got+len(data)/n.dim > n.rows {
		return fmt.Errorf("corpus: %d floats do not fit the %d × %d file after %d rows", len(data), n.rows, n.dim, n.got)
	}
	if cap(n.buf) < 4*len(data) {
		n.buf = make([]byte, 4*len(data))
	}
	b := n.buf[:4*len(data)]
	for j, x := range data {
		binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
	}
	n.got += len(data) / n.dim
	if _, err := n.w.Write(b); err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	return nil
}

// Close flushes the file; it fails if fewer rows were written than the
// header says.
func (n *NpyWriter) Close() error {
	err := n.w.Flush()
	if cerr := n.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n.got != n.rows {
		err = fmt.Errorf("%d of %d rows written", n.got, n.rows)
	}
	if err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	return nil
}

// Load imports file through the router into its default collection with
// `router load` and returns its output (the summary line has the rate).
func (c *Cluster) Load(ctx context.Context, r *Router, file string) (string, error) {
	return c.LoadInto(ctx, r, "", file)
}

// LoadInto is Load into a named collection ("": the router's default).
func (c *Cluster) LoadInto(ctx context.Context, r *Router, collection, file string) (string, error) {
	out, _, err := c.LoadCPU(ctx, r, collection, file)
	return out, err
}

// LoadCPU is LoadInto that also returns the CPU time (user and system)
// the `router load` process used; flags are more `router load` flags.
func (c *Cluster) LoadCPU(ctx context.Context, r *Router, collection, file string, flags ...string) (string, time.Duration, error) {
	args := append([]string{"load", "--router", r.Base}, flags...)
	if collection != "" {
		args = append(args, "--collection", collection)
	}
	cmd := exec.CommandContext(ctx, c.cfg.Bin, append(args, file)...)
	out, err := cmd.CombinedOutput()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return string(out), cpu, fmt.Errorf("router load: %w\n%s", err, out)
	}
	return string(out), cpu, nil
}
