package main

import (
	"errors"
	"flag"
	"os"

	"github.com/trawl-search/trawl/backup"
)

// storeFlags say where backups are kept: --backup-dir, or an
// S3-compatible bucket (--backup-s3-*; its keys from the environment,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, never from flags).
type storeFlags struct {
	dir string
	s3  backup.S3Config
}

func addStoreFlags(fs *flag.FlagSet, f *storeFlags, dirHelp string) {
	fs.StringVar(&f.dir, "backup-dir", "", dirHelp)
	fs.StringVar(&f.s3.Endpoint, "backup-s3-endpoint", "", "keep backups in an S3-compatible bucket at this HOST:PORT instead of --backup-dir (keys: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
	fs.StringVar(&f.s3.Bucket, "backup-s3-bucket", "", "the bucket (with --backup-s3-endpoint)")
	fs.StringVar(&f.s3.Prefix, "backup-s3-prefix", "", "a key prefix inside the bucket")
	fs.StringVar(&f.s3.Region, "backup-s3-region", "", "the bucket's region, when the store needs one")
	fs.BoolVar(&f.s3.Insecure, "backup-s3-insecure", false, "talk plain HTTP to the store (loopback, or TLS ended by a proxy)")
	fs.Int64Var(&f.s3.PartSize, "backup-s3-part-size", backup.DefaultPartSize, "multipart upload part size in bytes (at least 5 MiB)")
}

// configured reports whether a store was named.
func (f *storeFlags) configured() bool { return f.dir != "" || f.s3.Endpoint != "" }

// s3 returns the bucket's config, with its keys from the environment, or
// nil when no bucket was named.
func (f *storeFlags) s3Config() (*backup.S3Config, error) {
	if f.s3.Endpoint == "" {
		return nil, nil
	}
	if f.dir != "" {
		return nil, errors.New("--backup-dir and --backup-s3-endpoint: give one")
	}
	if f.s3.Bucket == "" {
		return nil, errors.New("--backup-s3-endpoint needs --backup-s3-bucket")
	}
	if f.s3.PartSize < 5<<20 {
		return nil, errors.New("--backup-s3-part-size: S3 wants at least 5 MiB (5242880)")
	}
	c := f.s3
	c.AccessKey, c.SecretKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	return &c, nil
}

// store is the Store the flags name (nil when none).
func (f *storeFlags) store() (backup.Store, error) {
	c, err := f.s3Config()
	switch {
	case err != nil:
		return nil, err
	case c != nil:
		return backup.NewS3(*c)
	case f.dir != "":
		return backup.Dir(f.dir), nil
	}
	return nil, nil
}
