// `make test-cluster`: installs the chart with helm on a real kube-apiserver
// and etcd (built by tools/cluster) running on loopback. Standard library only;
// the binaries come from the environment (see hack/test-cluster.sh).
module github.com/trawl-search/trawl/test/cluster

go 1.26.0
