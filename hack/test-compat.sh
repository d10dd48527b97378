#!/usr/bin/env bash
# make test-compat: trawl's Qdrant-compatible REST and gRPC driven by the
# real clients. Installs the pinned @qdrant/js-client-rest, @langchain/qdrant
# and @langchain/core from test/compat's package-lock.json (npm ci, into a
# scratch folder), builds test/compat/go (its own module, pinning
# github.com/qdrant/go-client, which speaks only gRPC), starts a real
# `router dev` on free loopback ports (HTTP and --qdrant-grpc-addr) with a
# small corpus, and runs test/compat/compat.mjs against it (the dev
# collection, then collections the clients create, alias, delete and
# re-create), then the Go client's run (two collections of its own, faults
# injected through the dev endpoints): every client call is printed with
# its result and checked against a brute force. Node and npm come from
# Debian packages, installed with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "test-compat: node/npm missing; installing Debian's nodejs and npm"
	sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi
echo "test-compat: node $(node --version), npm $(npm --version)"

work=$(mktemp -d -t trawl-compat.XXXXXX)
router_pid=""
cleanup() {
	if [ -n "$router_pid" ]; then
		kill "$router_pid" 2>/dev/null || true
		wait "$router_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp test/compat/package.json test/compat/package-lock.json test/compat/compat.mjs "$work/"
(cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
# The docs drift test (api/qdrant/docs_test.go) reads the client's REST
# operations from testdata, so `make test` needs no npm: it must be the
# pinned client's.
if ! node hack/qdrant-rest-ops.mjs "$work/node_modules" | diff -u api/qdrant/testdata/qdrant-rest-operations.txt -; then
	echo "test-compat: api/qdrant/testdata/qdrant-rest-operations.txt is not the pinned client's; regenerate it:"
	echo "  node hack/qdrant-rest-ops.mjs NODE_MODULES > api/qdrant/testdata/qdrant-rest-operations.txt (then list the changes in docs/qdrant.md)"
	exit 1
fi
go build -o "$work/router" ./cmd/router
(cd test/compat/go && go build -o "$work/compat-go" .)
echo "test-compat: clients installed and router built in $((SECONDS - start)) s"

# A free port: bind 0, read it back, release it (router dev binds it next).
freeport() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
port=$(freeport)
gport=$(freeport)
dim=64
"$work/router" dev --http-addr "127.0.0.1:$port" --qdrant-grpc-addr "127.0.0.1:$gport" --docs 500 --dim "$dim" >"$work/router.out" 2>"$work/router.log" &
router_pid=$!
for _ in $(seq 1 600); do
	if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
		break
	fi
	if ! kill -0 "$router_pid" 2>/dev/null; then
		echo "test-compat: router dev exited:"; cat "$work/router.log"; exit 1
	fi
	sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { echo "test-compat: router dev not ready in 60 s"; tail -20 "$work/router.log"; exit 1; }
echo "test-compat: router dev ready on 127.0.0.1:$port, Qdrant gRPC on 127.0.0.1:$gport (3 shards x 3 replicas, 500 docs of $dim dims)"

status=0
(cd "$work" && TRAWL_URL="http://127.0.0.1:$port" TRAWL_DIM="$dim" node compat.mjs) || status=$?
if [ "$status" -eq 0 ]; then
	echo "test-compat: the Go client (gRPC)"
	TRAWL_URL="http://127.0.0.1:$port" TRAWL_GRPC="127.0.0.1:$gport" "$work/compat-go" || status=$?
fi
if [ "$status" -ne 0 ]; then
	echo "test-compat: FAILED; the router's last log lines:"
	tail -20 "$work/router.log"
	exit "$status"
fi
echo "test-compat: passed in $((SECONDS - start)) s"
