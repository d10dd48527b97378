// Command router is trawl's one binary: the router (serve), a shard server
// (shard), the whole cluster in one process (dev), and bulk import (load).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `trawl: a scatter-gather vector search router.

Usage:
  router serve   the router: HTTP API over every shard
  router shard   a shard server
  router dev     3 shards x 3 replicas (a raft group each) and the router in this process
  router load    bulk import .npy, .fvecs or JSON Lines through a router
  router admin   change a shard's replicas online (add, remove, replace) and show them

Run "router COMMAND --help" for a command's flags; every flag has an
environment twin TRAWL_<FLAG> (e.g. --http-addr is TRAWL_HTTP_ADDR).
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = runServe(ctx, args)
	case "shard":
		err = runShard(ctx, args)
	case "dev":
		err = runDev(ctx, args)
	case "load":
		err = runLoad(ctx, args)
	case "admin":
		err = runAdmin(ctx, args, os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the flag set printed the command's flags, as asked
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
}
