package backup

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config reaches a bucket of an S3-compatible object store.
type S3Config struct {
	Endpoint  string // host:port
	Bucket    string
	Prefix    string // keys go under it ("" for the bucket's root)
	AccessKey string
	SecretKey string
	Region    string
	// Insecure talks plain HTTP (a store on loopback, or behind a proxy
	// that terminates TLS).
	Insecure bool
	// PartSize is the multipart upload's part size (DefaultPartSize if
	// zero; S3's minimum is 5 MiB).
	PartSize int64
}

// DefaultPartSize is the part size of uploads to S3.
const DefaultPartSize = 16 << 20

// S3 is a Store in a bucket of an S3-compatible object store, through
// minio-go. Files are objects under the prefix; "directories" are key
// prefixes.
type S3 struct {
	c        *minio.Client
	core     minio.Core
	bucket   string
	prefix   string
	partSize int64
}

// NewS3 returns the bucket's Store. It does not reach the store.
func NewS3(cfg S3Config) (*S3, error) {
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""), Secure: !cfg.Insecure,
		Region: cfg.Region, BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 %s: %w", cfg.Endpoint, err)
	}
	ps := cfg.PartSize
	if ps <= 0 {
		ps = DefaultPartSize
	}
	return &S3{c: c, core: minio.Core{Client: c}, bucket: cfg.Bucket, prefix: strings.Trim(cfg.Prefix, "/"), partSize: ps}, nil
}

func (s *S3) key(name string) string { return path.Join(s.prefix, name) }

// Create implements Store: the object is uploaded as it is written
// (multipart, one part at a time) and exists only once Close returned
// nil; a failed upload is aborted.
func (s *S3) Create(ctx context.Context, name string) (io.WriteCloser, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		// DisableContentSha256: the payload goes UNSIGNED-PAYLOAD (its
		// integrity is the transport's and, for a backup, the manifest's
		// SHA-256), not in aws-chunked signed streaming, which some
		// S3-compatible servers store as is.
		_, err := s.c.PutObject(ctx, s.bucket, s.key(name), pr, -1, minio.PutObjectOptions{PartSize: uint64(s.partSize), DisableContentSha256: true})
		_ = pr.CloseWithError(err) // unblocks a writer the upload gave up on
		done <- err
	}()
	return &s3Writer{pw: pw, done: done, name: name}, nil
}

type s3Writer struct {
	pw   *io.PipeWriter
	done chan error
	name string
}

func (w *s3Writer) Write(b []byte) (int, error) { return w.pw.Write(b) }

func (w *s3Writer) Close() error {
	_ = w.pw.Close()
	if err := <-w.done; err != nil {
		return fmt.Errorf("upload %s: %w", w.name, err)
	}
	return nil
}

// Open implements Store.
func (s *S3) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if _, err := s.c.StatObject(ctx, s.bucket, s.key(name), minio.StatObjectOptions{}); err != nil {
		return nil, s3Err(name, err)
	}
	obj, err := s.c.GetObject(ctx, s.bucket, s.key(name), minio.GetObjectOptions{})
	if err != nil {
		return nil, s3Err(name, err)
	}
	return obj, nil
}

func s3Err(name string, err error) error {
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NoSuchBucket":
		return fmt.Errorf("%s: %w (%v)", name, fs.ErrNotExist, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	p := s.key(prefix)
	if p != "" {
		p += "/"
	}
	var out []string
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: p}) {
		if o.Err != nil {
			return nil, o.Err
		}
		if name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, p), "/"); ok && name != "" && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	return out, nil
}

// RemoveAll implements Store.
func (s *S3) RemoveAll(ctx context.Context, name string) error {
	p := s.key(name) + "/"
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: p, Recursive: true}) {
		if o.Err != nil {
			return o.Err
		}
		if err := s.c.RemoveObject(ctx, s.bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// UploadStats says what an Upload did.
type UploadStats struct {
	Files, Skipped int   // files uploaded; files already there whole
	Parts, Reused  int   // parts uploaded; parts an interrupted upload had sent
	Bytes          int64 // bytes sent
}

// Upload copies the complete backup at prefix of src to the same prefix
// of dst, resuming an earlier Upload that was interrupted: a file already
// in the bucket at its manifest size is skipped, and a file whose
// multipart upload was cut short continues from the parts the store holds
// (each checked against the local part's MD5) instead of starting over.
// The manifest goes last, so the copy is listed only once whole. part,
// when set, is called after each part sent (tests interrupt there).
func Upload(ctx context.Context, src Store, prefix string, dst *S3, part func(UploadStats)) (UploadStats, error) {
	var st UploadStats
	r, err := Open(ctx, src, prefix)
	if err != nil {
		return st, err
	}
	files := append(append([]File(nil), r.Manifest.Files...), File{Name: ManifestFile, Bytes: -1})
	for _, f := range files {
		if err := dst.uploadFile(ctx, src, path.Join(prefix, f.Name), f.Bytes, &st, part); err != nil {
			return st, fmt.Errorf("upload %s: %w", f.Name, err)
		}
	}
	return st, nil
}

func (s *S3) uploadFile(ctx context.Context, src Store, name string, size int64, st *UploadStats, part func(UploadStats)) error {
	key := s.key(name)
	if size >= 0 {
		if info, err := s.c.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{}); err == nil && info.Size == size {
			st.Skipped++
			return nil
		}
	}
	in, err := src.Open(ctx, name)
	if err != nil {
		return err
	}
	defer in.Close()
	uploadID, have, err := s.resumable(ctx, key)
	if err != nil {
		return err
	}
	if uploadID == "" {
		if uploadID, err = s.core.NewMultipartUpload(ctx, s.bucket, key, minio.PutObjectOptions{}); err != nil {
			return err
		}
	}
	buf := make([]byte, s.partSize)
	var parts []minio.CompletePart
	for n := 1; ; n++ {
		k, err := io.ReadFull(in, buf)
		if errors.Is(err, io.EOF) && n > 1 {
			break
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return err
		}
		chunk := buf[:k]
		sum := md5.Sum(chunk)
		if p, ok := have[n]; ok && p.Size == int64(k) && strings.Trim(p.ETag, `"`) == hex.EncodeToString(sum[:]) {
			parts = append(parts, minio.CompletePart{PartNumber: n, ETag: p.ETag})
			st.Reused++
		} else {
			p, err := s.core.PutObjectPart(ctx, s.bucket, key, uploadID, n, bytes.NewReader(chunk), int64(k), minio.PutObjectPartOptions{DisableContentSha256: true})
			if err != nil {
				return err
			}
			parts = append(parts, minio.CompletePart{PartNumber: n, ETag: p.ETag})
			st.Parts++
			st.Bytes += int64(k)
			if part != nil {
				part(*st)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if k < len(buf) {
			break
		}
	}
	if _, err := s.core.CompleteMultipartUpload(ctx, s.bucket, key, uploadID, parts, minio.PutObjectOptions{}); err != nil {
		return err
	}
	st.Files++
	return nil
}

// resumable finds an unfinished multipart upload of key and the parts it
// holds, by number.
func (s *S3) resumable(ctx context.Context, key string) (string, map[int]minio.ObjectPart, error) {
	res, err := s.core.ListMultipartUploads(ctx, s.bucket, key, "", "", "", 1000)
	if err != nil {
		return "", nil, err
	}
	for _, u := range res.Uploads {
		if u.Key != key {
			continue
		}
		have := map[int]minio.ObjectPart{}
		marker := 0
		for {
			lp, err := s.core.ListObjectParts(ctx, s.bucket, key, u.UploadID, marker, 1000)
			if err != nil {
				return "", nil, err
			}
			for _, p := range lp.ObjectParts {
				have[p.PartNumber] = p
			}
			if !lp.IsTruncated {
				break
			}
			marker = lp.NextPartNumberMarker
		}
		return u.UploadID, have, nil
	}
	return "", nil, nil
}
