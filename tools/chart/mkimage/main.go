// Command mkimage builds trawl's container image without a Docker daemon: the
// static router binary as the only file of one layer on an empty base, run as
// uid 65532, written as an image tarball (`docker load`, `kind load
// image-archive`, `crane push` take it). The Dockerfile builds the same image
// for people with Docker.
//
//	mkimage -binary .bin/image/router -tag ghcr.io/trawl-search/trawl:0.1.0 -out .bin/trawl-image.tar
//	mkimage -verify .bin/trawl-image.tar   # runs the image's entrypoint with --help
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	entrypoint = "/router"
	user       = "65532:65532" // non-root; the chart's securityContext expects it
)

func main() {
	binary := flag.String("binary", "", "static router binary to put in the image")
	tag := flag.String("tag", "ghcr.io/trawl-search/trawl:dev", "image reference recorded in the tarball")
	out := flag.String("out", "trawl-image.tar", "image tarball to write")
	source := flag.String("source", "https://github.com/trawl-search/trawl", "org.opencontainers.image.source label")
	verify := flag.String("verify", "", "instead of building, check this image tarball: non-root, no shell, entrypoint runs --help")
	flag.Parse()
	log.SetFlags(0)
	if *verify != "" {
		if err := check(*verify); err != nil {
			log.Fatalf("mkimage: %s: %v", *verify, err)
		}
		return
	}
	if *binary == "" {
		log.Fatal("mkimage: -binary is required")
	}
	if err := build(*binary, *tag, *out, *source); err != nil {
		log.Fatalf("mkimage: %v", err)
	}
}

func build(binary, tag, out, source string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	// One layer holding only the binary. Timestamps are zero so the same binary
	// always gives the same image digest.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: strings.TrimPrefix(entrypoint, "/"), Mode: 0o555, Size: int64(len(bin)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = []string{entrypoint}
	cfg.Config.User = user
	cfg.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}, "7070/tcp": {}, "9090/tcp": {}}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.source": source,
		"org.opencontainers.image.title":  "trawl",
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s@%s\n", out, ref, digest)
	return nil
}

// check reads the tarball back as any consumer would, and runs the entrypoint.
func check(path string) error {
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if u := cfg.Config.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || u == "root" {
		return fmt.Errorf("image runs as root (User %q)", u)
	}
	if len(cfg.Config.Entrypoint) != 1 {
		return fmt.Errorf("entrypoint %v", cfg.Config.Entrypoint)
	}
	want := strings.TrimPrefix(cfg.Config.Entrypoint[0], "/")
	tr := tar.NewReader(mutate.Extract(img))
	dir, err := os.MkdirTemp("", "mkimage-verify")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var found string
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		files = append(files, h.Name)
		if strings.HasSuffix(h.Name, "/sh") || strings.HasSuffix(h.Name, "/bash") {
			return fmt.Errorf("image contains a shell: %s", h.Name)
		}
		if strings.TrimPrefix(h.Name, "./") == want {
			found = filepath.Join(dir, "router")
			f, err := os.OpenFile(found, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
	if found == "" {
		return fmt.Errorf("entrypoint %s not in the image (files: %v)", want, files)
	}
	cmd := exec.Command(found, "--help")
	outb, err := cmd.CombinedOutput()
	fmt.Printf("%s", outb)
	if err != nil {
		return fmt.Errorf("%s --help: %v", cfg.Config.Entrypoint[0], err)
	}
	fmt.Printf("ok: %s: user %s, entrypoint %v, %d file(s), no shell\n", path, cfg.Config.User, cfg.Config.Entrypoint, len(files))
	return nil
}
