# The trawl image for people with Docker: a static router binary alone on an
# empty base, non-root, no shell. `make image` builds the same image without a
# daemon (hack/image.sh); the Helm chart's default image is that one.
#
#   docker build -t ghcr.io/trawl-search/trawl:dev .
#   docker run --rm ghcr.io/trawl-search/trawl:dev --help
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o /out/router ./cmd/router

FROM scratch
COPY --from=build /out/router /router
USER 65532:65532
EXPOSE 8080 7070 9090
ENTRYPOINT ["/router"]
