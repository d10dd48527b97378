#!/usr/bin/env bash
# make test-alerts: the chart's alert rules on a live Prometheus. Builds the
# router and a pinned Prometheus server (tools/alerts/go.mod) into .bin/ and
# runs tools/alerts' tests: a unit test of the rule rewrite, then the live one
# (router dev under steady search load on 127.0.0.1, Prometheus scraping it
# every second with the chart's rules time-compressed 30x; a healthy control
# period fires nothing; every replica of one shard is stopped, then restored;
# the degraded-answer, shard and replica alerts must fire naming that shard and
# then resolve, with the seconds each took printed).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .bin

# The test keeps its files in $work and records its pids there (its own and
# its children's: router, prometheus). Those die with the test (Pdeathsig);
# should the test be stopped hard, this trap ends the recorded pids, by pid,
# and removes $work.
work=$(mktemp -d -t trawl-alerts.XXXXXX)
cleanup() {
	for f in "$work"/*/*.pid; do
		[ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$SECONDS
go build -o .bin/router ./cmd/router
(
	cd tools/alerts
	# remove_all_sd leaves out the cloud service discovery (AWS, Azure, GCE,
	# Kubernetes, ...): the test scrapes a static target. Without the
	# builtinassets tag the web UI's assets are not embedded (the module zip
	# has none); the HTTP API, all the test uses, needs none.
	version=$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
	go build -buildvcs=false -tags remove_all_sd \
		-ldflags "-X github.com/prometheus/common/version.Version=${version#v}" \
		-o ../../.bin/prometheus github.com/prometheus/prometheus/cmd/prometheus
)
echo "test-alerts: router and prometheus built in $((SECONDS - start)) s"

cd tools/alerts
TRAWL_ALERTS_DIR="$work" TRAWL_ROUTER="$OLDPWD/.bin/router" PROMETHEUS="$OLDPWD/.bin/prometheus" \
	go test -count=1 -v -timeout 10m ./... "$@"
echo "test-alerts: done in $((SECONDS - start)) s"
