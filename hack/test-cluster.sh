#!/usr/bin/env bash
# make test-cluster: installs the chart with helm on a real kube-apiserver and
# etcd on loopback. Both are built from the Go module proxy by tools/cluster
# (k8s.io/kubernetes with its staging modules replaced by the published
# k8s.io/* versions; etcd through a small etcdmain wrapper). A cold build takes
# a long while on 2 cores; Go's build cache makes later runs quick.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .bin/cluster

start=$SECONDS
kube_version=$(cd tools/cluster && go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kube_version" | cut -d. -f2)
# A binary built outside Kubernetes's own build has no version stamped in;
# helm checks the chart's kubeVersion against what the server reports, and the
# server derives its API emulation version from it.
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=${kube_version} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=${minor} \
 -X k8s.io/component-base/version.gitTreeState=clean"
(
	cd tools/cluster
	go build -buildvcs=false -ldflags "$ldflags" -o ../../.bin/cluster/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	go build -buildvcs=false -o ../../.bin/cluster/etcd ./cmd/etcd
)
(cd tools/chart && go build -buildvcs=false -o ../../.bin/helm helm.sh/helm/v3/cmd/helm)
echo "test-cluster: kube-apiserver ${kube_version}, etcd and helm built in $((SECONDS - start)) s"

# CRDs for the monitoring and cert-manager cases, from the upstream modules'
# own files (pinned here; the Go types in test/chart come from the same projects).
moddir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }
po=$(moddir github.com/prometheus-operator/prometheus-operator@v0.85.0)
cm=$(moddir github.com/cert-manager/cert-manager@v1.21.2)
export CRD_FILES="$po/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml:$po/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml:$cm/deploy/crds/cert-manager.io_certificates.yaml"

export HELM="$PWD/.bin/helm" KUBE_APISERVER="$PWD/.bin/cluster/kube-apiserver" ETCD="$PWD/.bin/cluster/etcd"
cd test/cluster
go test -count=1 -v -timeout 15m ./... "$@"
echo "test-cluster: done in $((SECONDS - start)) s"
