#!/usr/bin/env bash
# make image: the container image without a Docker daemon. Builds the static
# router binary, puts it alone on an empty base (tools/chart/mkimage, with
# go-containerregistry pinned in tools/chart/go.mod), writes .bin/trawl-image.tar,
# then proves the tarball works: reads it back, checks it runs as non-root with
# no shell, and runs its entrypoint with --help.
#
# The tag defaults to the chart's default image, ghcr.io/trawl-search/trawl:<appVersion>;
# set IMAGE to override. Load it with `docker load -i`, `kind load image-archive`
# or push it with `crane push .bin/trawl-image.tar <ref>`.
set -euo pipefail
cd "$(dirname "$0")/.."

app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' helm/trawl/Chart.yaml)
image=${IMAGE:-ghcr.io/trawl-search/trawl:${app_version}}

if [ ! -d cmd/router ]; then
	echo "image: cmd/router does not exist yet; nothing to put in the image" >&2
	exit 1
fi
mkdir -p .bin/image
# Static (no cgo) so the image needs no libc; -trimpath so paths on the build
# machine do not end up in the binary.
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false -ldflags='-s -w' \
	-o .bin/image/router ./cmd/router
(cd tools/chart && go build -buildvcs=false -o ../../.bin/mkimage ./mkimage)
.bin/mkimage -binary .bin/image/router -tag "$image" -out .bin/trawl-image.tar
.bin/mkimage -verify .bin/trawl-image.tar
