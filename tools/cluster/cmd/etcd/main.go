// Command etcd is the etcd server, built from the module pinned in this
// module's go.mod so the test cluster needs no downloaded binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
