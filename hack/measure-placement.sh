#!/usr/bin/env bash
# Memory, disk and restart of one replica per float32 placement: a single
# `router shard` (a group of one) behind `router serve`, an IVF collection
# of N x 1536 random rows loaded with `router load`, then
#   - anonymous memory (/proc/PID/smaps_rollup "Anonymous") per vector,
#   - the data directory per vector (du: raft.db, snapshots, segments),
#   - SIGKILL and restart: seconds until the shard's /readyz answers 200.
# usage: hack/measure-placement.sh NPY_FILE [on_disk in_memory]
# The file is float32 [N, 1536] (.npy). Needs curl. Prints one line per
# placement; the machine's load (uptime) first, as it is shared.
# Environment: ROUTER_BIN runs that router binary instead of building
# this tree's (to compare two versions in one run); SETTINGS is the
# collection's settings besides float32 (default: dot, ivf); RESTARTS is
# how many kill-and-restart cycles to time (default 1; each is printed,
# then the median); KEEP_LOGS is a directory to copy the processes' logs
# to (SHARD_LOG_LEVEL=info shows what a restart restored and replayed).
set -euo pipefail
npy=$1; shift
places=("${@:-on_disk in_memory}")
read -r -a places <<<"${places[*]}"
n=$(head -c 128 "$npy" | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$')
work=$(mktemp -d /tmp/trawl-placement-XXXX)
bin=${ROUTER_BIN:-$work/router}
[ -n "${ROUTER_BIN:-}" ] || go build -o "$bin" ./cmd/router
settings=${SETTINGS:-'"metric": "dot", "index": "ivf"'}
restarts=${RESTARTS:-1}
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_LOGS:-}" ]; then mkdir -p "$KEEP_LOGS" && cp "$work"/*.log "$KEEP_LOGS"/; fi
	rm -rf "$work"
}
trap cleanup EXIT
wait_ok() { # URL SECONDS
	local end=$((SECONDS + $2))
	until [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ]; do
		[ $SECONDS -lt $end ] || { echo "timeout waiting for $1" >&2; return 1; }
		sleep 0.05
	done
}
anon_kib() { awk '/^Anonymous:/ {print $2}' "/proc/$1/smaps_rollup"; }
uptime
for place in "${places[@]}"; do
	dir=$work/data-$place
	shard_args=(shard --grpc-addr 127.0.0.1:17171 --http-addr 127.0.0.1:19191 --data-dir "$dir" --dim 8 --log-level "${SHARD_LOG_LEVEL:-warn}")
	"$bin" "${shard_args[@]}" 2>"$work/shard-$place.log" & spid=$!; pids+=("$spid")
	"$bin" serve --shard shard-0=127.0.0.1:17171 --http-addr 127.0.0.1:18181 --qdrant-grpc-addr 127.0.0.1:16335 \
		--log-level warn 2>"$work/router-$place.log" & rpid=$!; pids+=("$rpid")
	wait_ok http://127.0.0.1:18181/readyz 60
	until curl -sf -X PUT http://127.0.0.1:18181/v1/collections/m \
		-d "{\"dimension\": 1536, $settings, \"float32\": \"$place\"}" >/dev/null; do sleep 0.2; done
	t0=$SECONDS
	"$bin" load --router http://127.0.0.1:18181 --collection m "$npy" >"$work/load-$place.log" 2>&1
	load_s=$((SECONDS - t0))
	# Serving again once the IVF index over every row is built.
	case $settings in *ivf*)
		until curl -s http://127.0.0.1:18181/v1/collections/m | grep -q '"state":"ready","lists"'; do sleep 0.5; done ;;
	esac
	sleep 5
	anon=$(anon_kib "$spid")
	kill -9 "$spid"; wait "$spid" 2>/dev/null || true
	disk=$(du -sb "$dir" | cut -f1)
	seg=$(du -sb "$dir/segments" 2>/dev/null | cut -f1 || echo 0)
	snap=$(du -sb "$dir/snapshots" | cut -f1)
	times=()
	for ((r = 0; r < restarts; r++)); do
		if [ "$r" -gt 0 ]; then kill -9 "$spid"; wait "$spid" 2>/dev/null || true; fi
		t1=$(date +%s.%N)
		"$bin" "${shard_args[@]}" 2>>"$work/shard-$place.log" & spid=$!; pids+=("$spid")
		wait_ok http://127.0.0.1:19191/readyz 600
		t2=$(date +%s.%N)
		times+=("$(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.2f", b-a}')")
		echo "$place restart $((r + 1)): ${times[-1]}s to serving"
		sleep 2
	done
	med=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	sleep 3
	anon2=$(anon_kib "$spid")
	awk -v p="$place" -v n="$n" -v a="$anon" -v a2="$anon2" -v d="$disk" -v s="$seg" -v sn="$snap" -v med="$med" -v k="$restarts" -v ls="$load_s" 'BEGIN {
		printf "%-9s rows %d  load %ds  anon %.0f MiB = %.2f KiB/vector (after restart %.2f KiB/vector)  disk %.2f KiB/vector (segments %.2f, snapshots %.2f)  restart-to-serving %.2fs (median of %d)\n",
			p, n, ls, a/1024, a/n, a2/n, d/1024/n, s/1024/n, sn/1024/n, med, k }'
	kill -9 "$spid" "$rpid"; wait "$spid" "$rpid" 2>/dev/null || true
done
