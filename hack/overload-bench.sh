#!/usr/bin/env bash
# The overload check at the default deadline, out of process: three
# `router shard` processes (groups of one), `router serve` over them, N
# random 1536-D documents (12 000 by default) loaded with `router load`,
# then `trawlbench load` from bench/: capacity (8 closed-loop clients),
# then open loop at each factor × capacity. Every query is JSON floats
# with ?deadline_ms=$DEADLINE_MS (50: the default).
#
# The phases run once per level of NICE (default "0 -10"), the niceness
# of the router and the load generator; the shards stay at 0. At 0 every
# process has the same CPU priority, so the router waits behind the scans
# (and whatever else the host runs) for a core before it reads a request.
# At -10 the router and the load generator take a core as soon as they
# are runnable, which emulates on one shared host what production has:
# router, shards and clients on hosts of their own. (Nicing the shards
# instead does not do it on a host other work shares, and a niced load
# generator waits for a core itself and measures its own wait.) Each pass
# measures its own capacity. Negative niceness needs root (CAP_SYS_NICE).
# After each phase it prints how long the router's, the shards' and the
# load generator's threads waited on a run queue for a core
# (/proc/*/task/*/schedstat), beside the router's own refusal time and
# goroutine scheduling quantiles from its /metrics.
#
#   bash hack/overload-bench.sh                          # 3x and 5x, 12 s each, at nice 0 and -10
#   FACTORS="3 5" DURATION=12s DOCS=12000 DEADLINE_MS=50 NICE="0 -10" ROUTER_FLAGS="--hedge=false" bash hack/overload-bench.sh
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
NICE=${NICE:-0 -10}
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
shard_pids=()
for i in 0 1 2; do
	"$work/router" shard --grpc-addr "127.0.0.1:1707$i" --http-addr "127.0.0.1:1909$i" --data-dir "$work/shard-$i" \
		>"$work/shard-$i.log" 2>&1 &
	pids+=($!)
	shard_pids+=($!)
	shards+=(--shard "shard-$i=127.0.0.1:1707$i")
done
# shellcheck disable=SC2086
"$work/router" serve --http-addr 127.0.0.1:18090 "${shards[@]}" --ensure-collection trawl=1536:cosine $ROUTER_FLAGS \
	>"$work/router.log" 2>&1 &
pids+=($!)
router_pid=$!
for _ in $(seq 300); do
	curl -fsS http://127.0.0.1:18090/readyz >/dev/null 2>&1 && break
	sleep 0.1
done
"$work/router" load --router http://127.0.0.1:18090 --concurrency 4 "$work/corpus.npy" | tail -1
level=0
load() { nice -n "$level" "$work/trawlbench" load -url http://127.0.0.1:18090 -encoding json -deadline-ms "$DEADLINE_MS" "$@"; }
# rqwait PID...: nanoseconds the processes' threads have waited on a run
# queue for a core, summed.
rqwait() {
	local total=0 p f
	for p in "$@"; do
		for f in /proc/"$p"/task/*/schedstat; do
			{ read -r _ w _ <"$f"; } 2>/dev/null && total=$((total + w))
		done
	done
	echo "$total"
}
# phase NAME ARGS...: one trawlbench load run, then the run-queue waits
# of the router and the shards over it, per second of wall time.
phase() {
	local t0 r0 s0 r1 s1 t1
	t0=$(date +%s%N) r0=$(rqwait "$router_pid") s0=$(rqwait "${shard_pids[@]}")
	out=$(load "$@")
	t1=$(date +%s%N) r1=$(rqwait "$router_pid") s1=$(rqwait "${shard_pids[@]}")
	echo "$out"
	python3 -c "import sys; r,s,t=[int(x) for x in sys.argv[1:]]; print('  run-queue wait per s of run: router %.0f ms, shards %.0f ms (summed)' % (r/t*1e3, s/t*1e3))" \
		$((r1 - r0)) $((s1 - s0)) $((t1 - t0))
}
for level in $NICE; do
	# Niceness is per thread on Linux: every thread of the router (threads
	# it starts later inherit it from the thread that starts them).
	renice -n "$level" -p $(ls /proc/"$router_pid"/task) >/dev/null
	echo "==== router and load generator at nice $level, shards at 0"
	echo "== warm-up"
	load -clients 2 -duration 3s >/dev/null
	echo "== capacity: 8 closed-loop clients, 10 s"
	phase -clients 8 -duration 10s
	cap_out=$out
	capacity=$(echo "$cap_out" | sed -n 's/.* \([0-9.]*\) complete\/s$/\1/p' | head -1)
	for f in $FACTORS; do
		rate=$(python3 -c "print(max(1, round($f * $capacity)))")
		echo "== ${f}x capacity: open loop at $rate/s for $DURATION (capacity $capacity complete/s, router and load generator at nice $level)"
		phase -rate "$rate" -duration "$DURATION"
		sleep 2
	done
	uptime
done
uptime
