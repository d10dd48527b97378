package backup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// s3Env names the gofakes3 binary the S3 test runs (make test-s3 builds
// it from tools/s3, where it is pinned).
const s3Env = "TRAWL_GOFAKES3"

// startS3 runs gofakes3 on a loopback port with bucket "trawl" and
// returns the bucket's store with parts of 5 MiB (S3's least).
func startS3(t *testing.T, prefix string) *S3 {
	t.Helper()
	bin := os.Getenv(s3Env)
	if bin == "" {
		t.Skip("set " + s3Env + " to a gofakes3 binary (make test-s3 builds one from tools/s3)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "-host", addr, "-backend", "memory", "-initialbucket", "trawl", "-quiet")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	s, err := NewS3(S3Config{Endpoint: addr, Bucket: "trawl", Prefix: prefix, AccessKey: "test", SecretKey: "test", Region: "us-east-1",
		Insecure: true, PartSize: 5 << 20})
	require.NoError(t, err)
	return s
}

// bigBackup writes a backup of rows × dim in dir, large enough for
// several 5 MiB parts.
func bigBackup(t *testing.T, dir Dir, rows, dim int) {
	t.Helper()
	ctx := context.Background()
	w := NewWriter(dir, "c/b1")
	sw, err := w.Shard(ctx, "s0", dim, int64(rows))
	require.NoError(t, err)
	v := make([]float32, dim)
	for i := range rows {
		for j := range v {
			v[j] = float32(i*dim + j)
		}
		require.NoError(t, sw.Add(fmt.Sprintf("id-%d", i), v, []byte(fmt.Sprintf(`{"i":%d}`, i))))
	}
	require.NoError(t, sw.Close(3))
	_, err = w.Finish(ctx, Manifest{ID: "b1", Collection: "c", Settings: Settings{Dimension: dim, Metric: "dot"}, Shards: []Shard{sw.Info()}})
	require.NoError(t, err)
}

// The S3 store against a real S3-compatible server on loopback: a backup
// written straight to the bucket reads back and verifies; an upload of a
// local backup interrupted after its first part resumes from the parts
// the store holds, and the copy verifies.
func TestS3(t *testing.T) {
	ctx := context.Background()
	s := startS3(t, "backups")

	// Written straight to the bucket, multipart.
	w := NewWriter(s, "direct/b1")
	sw, err := w.Shard(ctx, "s0", 2, 2)
	require.NoError(t, err)
	require.NoError(t, sw.Add("a", []float32{1, 2}, []byte(`{"k":1}`)))
	require.NoError(t, sw.Add("b", []float32{3, 4}, nil))
	require.NoError(t, sw.Close(1))
	_, err = w.Finish(ctx, Manifest{ID: "b1", Collection: "direct", Settings: Settings{Dimension: 2, Metric: "dot"}, Shards: []Shard{sw.Info()}})
	require.NoError(t, err)
	ms, err := List(ctx, s, "direct")
	require.NoError(t, err)
	require.Len(t, ms, 1)
	r, err := Open(ctx, s, "direct/b1")
	require.NoError(t, err)
	require.NoError(t, r.Verify(ctx))
	_, err = Open(ctx, s, "direct/nope")
	require.ErrorIs(t, err, os.ErrNotExist)

	// An upload interrupted after its first part, then resumed.
	local := Dir(t.TempDir())
	bigBackup(t, local, 4000, 1024) // 16 MB of rows: four 5 MiB parts
	cctx, cancel := context.WithCancel(ctx)
	first, err := Upload(cctx, local, "c/b1", s, func(st UploadStats) {
		if st.Parts == 1 {
			cancel()
		}
	})
	require.True(t, errors.Is(err, context.Canceled), "the upload was interrupted: %v", err)
	require.Equal(t, 1, first.Parts)
	_, err = Open(ctx, s, "c/b1")
	require.ErrorIs(t, err, os.ErrNotExist, "no manifest: the copy is not a backup yet")

	second, err := Upload(ctx, local, "c/b1", s, nil)
	require.NoError(t, err)
	require.Equal(t, 1, second.Reused, "the part sent before the interruption is not sent again")
	require.Positive(t, second.Parts)
	r, err = Open(ctx, s, "c/b1")
	require.NoError(t, err)
	require.NoError(t, r.Verify(ctx), "the resumed copy is whole")

	third, err := Upload(ctx, local, "c/b1", s, nil)
	require.NoError(t, err)
	require.Equal(t, len(r.Manifest.Files), third.Skipped, "a finished copy is not sent again")

	require.NoError(t, s.RemoveAll(ctx, "c/b1"))
	ms, err = List(ctx, s, "c")
	require.NoError(t, err)
	require.Empty(t, ms)
}
