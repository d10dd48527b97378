#!/usr/bin/env bash
# The overload check at the default deadline, out of process: three
# `router shard` processes (groups of one), `router serve` over them, N
# random 1536-D documents (12 000 by default) loaded with `router load`,
# then `trawlbench load` from bench/: capacity (8 closed-loop clients),
# then open loop at each factor × capacity. Every query is JSON floats
# with ?deadline_ms=$DEADLINE_MS (50: the default).
#
#   bash hack/overload-bench.sh                          # 3x and 5x, 12 s each
#   FACTORS="3 5" DURATION=12s DOCS=12000 DEADLINE_MS=50 ROUTER_FLAGS="--hedge=false" bash hack/overload-bench.sh
#
# Prints `uptime` first and last: the figures are only as quiet as the
# machine. Needs python3 (to write the corpus) and ports 127.0.0.1:17070-17072,
# 19090-19092 and 18090.
set -euo pipefail
cd "$(dirname "$0")/.."
DOCS=${DOCS:-12000}
DEADLINE_MS=${DEADLINE_MS:-50}
DURATION=${DURATION:-12s}
FACTORS=${FACTORS:-3 5}
ROUTER_FLAGS=${ROUTER_FLAGS:-}
work=$(mktemp -d /tmp/trawl-overload-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
uptime
go build -o "$work/router" ./cmd/router
(cd bench && go build -o "$work/trawlbench" ./cmd/trawlbench)
python3 - "$work/corpus.npy" "$DOCS" <<'EOF'
import array, random, struct, sys
path, n, dim = sys.argv[1], int(sys.argv[2]), 1536
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, dim)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
rng = random.Random(42)
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    for _ in range(n):
        array.array("f", (rng.gauss(0, 1) for _ in range(dim))).tofile(f)
EOF
shards=()
for i in 0 1 2; do
	"$work/router" shard --grpc-addr "127.0.0.1:1707$i" --http-addr "127.0.0.1:1909$i" --data-dir "$work/shard-$i" \
		>"$work/shard-$i.log" 2>&1 &
	pids+=($!)
	shards+=(--shard "shard-$i=127.0.0.1:1707$i")
done
# shellcheck disable=SC2086
"$work/router" serve --http-addr 127.0.0.1:18090 "${shards[@]}" --ensure-collection trawl=1536:cosine $ROUTER_FLAGS \
	>"$work/router.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
	curl -fsS http://127.0.0.1:18090/readyz >/dev/null 2>&1 && break
	sleep 0.1
done
"$work/router" load --router http://127.0.0.1:18090 --concurrency 4 "$work/corpus.npy" | tail -1
load() { "$work/trawlbench" load -url http://127.0.0.1:18090 -encoding json -deadline-ms "$DEADLINE_MS" "$@"; }
echo "== warm-up"
load -clients 2 -duration 3s >/dev/null
echo "== capacity: 8 closed-loop clients, 10 s"
cap_out=$(load -clients 8 -duration 10s)
echo "$cap_out"
capacity=$(echo "$cap_out" | sed -n 's/.* \([0-9.]*\) complete\/s$/\1/p' | head -1)
for f in $FACTORS; do
	rate=$(python3 -c "print(max(1, round($f * $capacity)))")
	echo "== ${f}x capacity: open loop at $rate/s for $DURATION (capacity $capacity complete/s)"
	load -rate "$rate" -duration "$DURATION"
	sleep 2
done
uptime
