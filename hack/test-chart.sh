#!/usr/bin/env bash
# make test-chart: the chart, its alerts and its dashboard, offline. Builds the
# pinned helm and promtool (tools/chart/go.mod) into .bin/ and runs test/chart:
# helm lint --strict over the ci/ values matrix, helm template with every object
# decoded strictly into its Go type plus invariants and golden files, promtool
# check rules / test rules, the metric-name and dashboard checks.
# Update the golden files after an intended chart change with:
#   hack/test-chart.sh -update
# TRAWL_ROUTER=/path/to/router checks the chart's flags against, and starts
# shard-0's replicas from the chart's args with, a router built elsewhere (for
# one with the replicated shards' --peers: a three-replica group on loopback).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .bin

start=$SECONDS
(
	cd tools/chart
	go build -buildvcs=false -o ../../.bin/helm helm.sh/helm/v3/cmd/helm
	# remove_all_sd leaves out Prometheus's cloud service discovery (AWS, Azure,
	# GCE, Kubernetes, ...), which rule checks never use and which would
	# double promtool's cold build.
	go build -buildvcs=false -tags remove_all_sd -o ../../.bin/promtool github.com/prometheus/prometheus/cmd/promtool
)
echo "test-chart: tools built in $((SECONDS - start)) s"

export HELM="$PWD/.bin/helm" PROMTOOL="$PWD/.bin/promtool"
cd test/chart
go test -count=1 ./... "$@"
echo "test-chart: done in $((SECONDS - start)) s"
