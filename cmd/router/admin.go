package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

const adminUsage = `Usage: router admin COMMAND --shard NAME=HOST:PORT[,...] [flags]

Commands (each talks to the shard's replicas over their gRPC port; the
leader makes the change, a follower forwards it):
  status            every --shard group's members: voter or not, leader,
                    reachable, log index and lag (catch-up progress)
  add-replica       --replica HOST:PORT: add a replica (started with
                    router shard --join or on an empty --data-dir); it
                    joins as a non-voter and is promoted once caught up;
                    waits for the promotion unless --wait=false
  remove-replica    --replica HOST:PORT: remove a replica; refused when
                    the voters left would hold no live majority
  replace-replica   --old HOST:PORT --new HOST:PORT: add new, wait until
                    it is a voter, remove old (a dead replica's
                    replacement); repeat it to finish one cut short
  slots             [--collection NAME]: each collection's hash slot map
                    as the catalog holds it: slot count, map epoch, and
                    every shard's slots and documents (give every --shard)
  move-slot         --collection NAME --slot N --to SHARD: move one slot
                    online (fence, copy, flip, settle)
  rebalance         [--collection NAME]: move slots until every --shard
                    holds slots/shards of each collection, give or take
                    one (after adding a shard group to the list)
  drain SHARD       [--collection NAME]: move every slot off SHARD, the
                    others left balanced; then it can be removed
  converge          make every replica each --shard lists a voter of its
                    group (add-replica), then rebalance; a no-op on a
                    cluster already so (the Helm chart runs it after an
                    upgrade); it never removes a replica or drains
  backup            --collection NAME --backup-dir DIR: back the collection
                    up at a cut of every shard group into DIR/NAME/ID
                    (docs/backup.md), with a progress bar on a terminal;
                    or --router URL --collection A,B [--keep N]: have a
                    router back them up into its --backup-dir, keeping the
                    newest N (needs no --shard); --all instead of
                    --collection: a cluster backup, every collection at
                    one cut per shard group, into DIR/@cluster/ID
  backups           --collection NAME --backup-dir DIR: list its complete
                    backups (needs no --shard); --all: the cluster backups
  upload            --collection NAME --backup ID --backup-dir DIR
                    --backup-s3-endpoint HOST:PORT --backup-s3-bucket B:
                    copy a backup to an S3-compatible bucket, resuming an
                    interrupted copy (parts already sent are kept)
  (backup, backups and restore take --backup-s3-* instead of --backup-dir
  to use a bucket directly; keys: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)
  restore           --collection NAME --backup ID --backup-dir DIR
                    [--to TARGET]: check every file, then create TARGET
                    (default NAME; it must not exist) from the backup,
                    with the cluster's own shard count; ID may be a
                    cluster backup's (its part of NAME is restored);
                    --all --backup ID: every collection of a cluster
                    backup, under its own name; --resume continues a
                    restore a dead router left unfinished (the same
                    backup into the same target)
  (move-slot, rebalance, drain and converge: --rate rows/s caps each copy, --grace
  is how long an old owner keeps a moved slot's rows for routers still on
  the old map; give every --shard, the authority's included)

--shard is repeatable (env TRAWL_SHARDS, as router serve); a change acts on
one shard: the only one given, or the one --name says.
`

// adminCall bounds one membership RPC; a wait for a promotion is a series
// of them, so each answer brings fresh progress.
const adminCall = 30 * time.Second

func runAdmin(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(out, adminUsage)
		if len(args) == 0 {
			return errors.New("admin: no command given")
		}
		return nil
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("admin "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	var shards shardFlag
	fs.Var(&shards, "shard", "a shard and the replicas to reach it at, NAME=HOST:PORT[,HOST:PORT...] (repeatable; env TRAWL_SHARDS)")
	name := fs.String("name", "", "the shard a change acts on, when several --shard are given")
	tlsCA := fs.String("tls-ca", "", "CA file to verify shards with (inter-node TLS)")
	tlsCert := fs.String("tls-cert", "", "client certificate for mTLS to shards")
	tlsKey := fs.String("tls-key", "", "client key for mTLS to shards")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long a change may take, catch-up included")
	asJSON := fs.Bool("json", false, "status, slots: print JSON")
	var replicaAddr, oldAddr, newAddr *string
	wait := fs.Bool("wait", true, "add-replica: wait until the new replica is a voter")
	var collection *string
	var mv moveFlags
	var rate *int
	var grace *time.Duration
	var bk backupFlags
	switch cmd {
	case "status":
	case "slots":
		collection = fs.String("collection", "", "slots: only this collection")
	case "move-slot", "rebalance", "drain", "converge":
		collection = fs.String("collection", "", "the collection (move-slot: required; else: only this one)")
		rate = fs.Int("rate", coordinator.DefaultMoveRate, "rows a second a slot's copy may write")
		grace = fs.Duration("grace", 2*coordinator.DefaultCatalogRefresh, "how long an old owner keeps a moved slot's rows")
		if cmd == "move-slot" {
			fs.IntVar(&mv.slot, "slot", -1, "the slot to move")
			fs.StringVar(&mv.to, "to", "", "the shard to move it to")
		}
	case "add-replica", "remove-replica":
		replicaAddr = fs.String("replica", "", "the replica's address, HOST:PORT, as its peers reach it (its --advertise-addr)")
	case "replace-replica":
		oldAddr = fs.String("old", "", "the replica to replace, HOST:PORT")
		newAddr = fs.String("new", "", "its replacement, HOST:PORT, started with router shard --join")
	case "backup", "backups", "restore", "upload":
		addStoreFlags(fs, &bk.store, "the directory backups are kept in (a local path or a mounted volume)")
		fs.StringVar(&bk.collection, "collection", "", "the collection backed up")
		if cmd != "upload" {
			fs.BoolVar(&bk.all, "all", false, "a cluster backup (every collection at one cut per shard group) instead of --collection")
		}
		if cmd == "backup" {
			fs.StringVar(&bk.router, "router", "", "back up through this router's API (http://HOST:PORT; it writes to its own --backup-dir and records the backup metrics) instead of from this process; --collection may then list several, comma-separated")
			fs.StringVar(&bk.keyFile, "api-key-file", "", "with --router: file holding the API key, sent as Authorization: Bearer")
			fs.IntVar(&bk.keep, "keep", 0, "with --router: after each backup, delete all but the newest N of the collection (with --all: of the cluster backups) (0: keep all)")
		}
		if cmd == "restore" || cmd == "upload" {
			fs.StringVar(&bk.id, "backup", "", "the id of the backup (router admin backups lists them)")
			fs.StringVar(&bk.to, "to", "", "the collection to restore into (default: --collection); it must not exist")
		}
		if cmd == "restore" {
			fs.BoolVar(&bk.resume, "resume", false, "continue a restore into --to that a dead router left restoring (every row is written again, then the row count is checked)")
		}
	default:
		return fmt.Errorf("admin: unknown command %q (status, slots, move-slot, rebalance, drain, converge, add-replica, remove-replica, replace-replica, backup, backups, restore, upload)", cmd)
	}
	target := ""
	if cmd == "drain" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return errors.New("admin drain: name the shard to drain: router admin drain SHARD --shard ...")
		}
		target, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cmd == "move-slot" && (*collection == "" || mv.slot < 0 || mv.to == "") {
		return errors.New("admin move-slot: --collection NAME, --slot N and --to SHARD are required")
	}
	if cmd == "backup" && bk.all == (bk.collection != "") {
		return errors.New("admin backup: give --collection NAME[,NAME...] or --all")
	}
	if cmd == "backup" && bk.router != "" {
		var names []string
		if !bk.all {
			names = strings.Split(bk.collection, ",")
		}
		return adminBackupViaRouter(ctx, out, bk.router, bk.keyFile, names, bk.keep)
	}
	if !bk.store.configured() && (cmd == "backup" || cmd == "backups" || cmd == "restore") {
		return fmt.Errorf("admin %s: --backup-dir DIR (or --backup-s3-endpoint and --backup-s3-bucket) is required", cmd)
	}
	if cmd == "upload" {
		if bk.collection == "" || bk.id == "" || bk.store.dir == "" || bk.store.s3.Endpoint == "" {
			return errors.New("admin upload: --collection NAME, --backup ID, --backup-dir DIR and --backup-s3-endpoint/--backup-s3-bucket are required")
		}
		return adminUpload(ctx, out, bk)
	}
	if (bk.collection == "") == !bk.all && (cmd == "backups" || cmd == "restore") {
		return fmt.Errorf("admin %s: give --collection NAME or --all", cmd)
	}
	if cmd == "restore" && bk.all && bk.resume {
		return errors.New("admin restore --all: --resume is for one collection")
	}
	if cmd == "restore" && bk.all && bk.to != "" {
		return errors.New("admin restore --all: every collection is restored under its own name; --to is for one collection")
	}
	if cmd == "restore" && bk.id == "" {
		return errors.New("admin restore: --backup ID is required (router admin backups lists them)")
	}
	if cmd == "backups" {
		return adminBackups(ctx, out, bk)
	}
	if len(shards) == 0 {
		return errors.New("admin: no shards: give --shard NAME=HOST:PORT at least once (or TRAWL_SHARDS)")
	}
	for _, f := range []struct {
		flag string
		v    *string
	}{{"--replica", replicaAddr}, {"--old", oldAddr}, {"--new", newAddr}} {
		if f.v != nil && *f.v == "" {
			return fmt.Errorf("admin %s: %s HOST:PORT is required", cmd, f.flag)
		}
	}
	dial := client.DialConfig{Lazy: true}
	if *tlsCA != "" {
		creds, err := shard.ClientCredentials(*tlsCA, *tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-ca/--tls-cert/--tls-key: %w", err)
		}
		dial.Creds = creds
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch cmd {
	case "status":
		return adminStatus(ctx, out, shards, dial, *asJSON)
	case "slots":
		return adminSlots(ctx, out, shards, dial, *collection, *asJSON)
	case "backup", "restore":
		return adminBackup(ctx, out, cmd, shards, dial, bk)
	case "move-slot", "rebalance", "drain", "converge":
		mv.collection = *collection
		mv.cfg = coordinator.MoveConfig{RowsPerSecond: *rate, Grace: *grace}
		if *grace == 0 {
			mv.cfg.Grace = -1
		}
		if cmd == "converge" {
			return adminConverge(ctx, out, shards, dial, mv)
		}
		return adminMoves(ctx, out, cmd, shards, dial, target, mv)
	}
	spec, err := pickShard(shards, *name)
	if err != nil {
		return err
	}
	g, err := dialGroup(spec, dial)
	if err != nil {
		return err
	}
	defer g.close()
	var req *shardpb.ChangeMembersRequest
	switch cmd {
	case "add-replica":
		req = &shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Add{Add: *replicaAddr}, Wait: *wait}
	case "remove-replica":
		req = &shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Remove{Remove: *replicaAddr}}
	case "replace-replica":
		req = &shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Replace{Replace: &shardpb.ReplaceMember{Old: *oldAddr, New: *newAddr}}}
	}
	t0 := time.Now()
	resp, err := g.change(ctx, out, req)
	if err != nil {
		return fmt.Errorf("admin %s on %s: %w", cmd, spec.Name, err)
	}
	what := "done"
	if !resp.GetChanged() {
		what = "nothing to do: it was already so"
	}
	fmt.Fprintf(out, "%s %s: %s in %s\n", spec.Name, cmd, what, time.Since(t0).Round(time.Millisecond))
	st, err := g.members(ctx, true)
	if err != nil {
		st = &shardpb.MembersResponse{Members: resp.GetMembers()}
	}
	printStatus(out, toGroupStatus(spec.Name, st))
	return nil
}

func pickShard(shards []app.ShardSpec, name string) (app.ShardSpec, error) {
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = s.Name
		if s.Name == name {
			return s, nil
		}
	}
	switch {
	case name != "":
		return app.ShardSpec{}, fmt.Errorf("admin: --name %s is not one of the shards given (%s)", name, strings.Join(names, ", "))
	case len(shards) > 1:
		return app.ShardSpec{}, fmt.Errorf("admin: a change acts on one shard: say which with --name (%s)", strings.Join(names, ", "))
	}
	return shards[0], nil
}

// group is the admin's connections to one shard's replicas.
type group struct {
	name  string
	dial  client.DialConfig
	conns []*client.Conn
}

func dialGroup(spec app.ShardSpec, dial client.DialConfig) (*group, error) {
	g := &group{name: spec.Name, dial: dial}
	for _, a := range spec.Addrs {
		if err := g.add(a); err != nil {
			g.close()
			return nil, err
		}
	}
	return g, nil
}

func (g *group) add(addr string) error {
	if slices.ContainsFunc(g.conns, func(c *client.Conn) bool { return c.Addr() == addr }) {
		return nil
	}
	c, err := client.Dial(addr, g.dial)
	if err != nil {
		return err
	}
	g.conns = append(g.conns, c)
	return nil
}

func (g *group) close() {
	for _, c := range g.conns {
		_ = c.Close()
	}
}

// members asks every replica and returns the leader's answer, else the one
// with the highest commit index: a follower may not have applied the
// latest change yet, and a replica cut off from its group lists an old
// configuration.
func (g *group) members(ctx context.Context, progress bool) (*shardpb.MembersResponse, error) {
	var (
		best *shardpb.MembersResponse
		errs []error
	)
	for _, c := range g.conns {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.Members(cctx, progress)
		cancel()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", c.Addr(), err))
		case best == nil || best.GetLeader() != best.GetSelf() &&
			(resp.GetLeader() == resp.GetSelf() || resp.GetCommitIndex() > best.GetCommitIndex()):
			best = resp
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no replica of %s answered: %w", g.name, errors.Join(errs...))
	}
	return best, nil
}

// change sends req to the group until it is done: to each replica in turn
// while they refuse without taking it (unreachable, or a follower that
// cannot reach its leader — then to the leader it names), and again after
// an answer that says the change is under way (a catch-up outlasting one
// call), printing progress. Every change is idempotent, so sending one
// again is safe. A refusal (bad input, unsafe change) ends it.
func (g *group) change(ctx context.Context, out io.Writer, req *shardpb.ChangeMembersRequest) (*shardpb.ChangeMembersResponse, error) {
	var last error
	for ctx.Err() == nil {
		for i := 0; i < len(g.conns); i++ {
			c := g.conns[i]
			cctx, cancel := context.WithTimeout(ctx, adminCall)
			resp, err := c.ChangeMembers(cctx, req)
			cancel()
			if err == nil {
				return resp, nil
			}
			last = fmt.Errorf("%s: %w", c.Addr(), err)
			switch status.Code(err) {
			case codes.InvalidArgument, codes.FailedPrecondition, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
				return nil, errors.New(status.Convert(err).Message())
			}
			var nl *shard.NotLeaderError
			if errors.As(err, &nl) && nl.Leader() != "" {
				_ = g.add(nl.Leader())
			}
			if status.Code(err) == codes.DeadlineExceeded || strings.Contains(err.Error(), "catching up") {
				if st, merr := g.members(ctx, true); merr == nil {
					printProgress(out, g.name, st)
				}
				break // under way: ask again from the start
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil, fmt.Errorf("not done within --timeout: %w", last)
}

func printProgress(out io.Writer, name string, st *shardpb.MembersResponse) {
	for _, m := range st.GetMembers() {
		if !m.GetVoter() {
			fmt.Fprintf(out, "%s: %s catching up: log index %d of %d\n", name, m.GetAddr(), m.GetLastIndex(), st.GetLastIndex())
		}
	}
}

// memberStatus is one member in status's JSON.
type memberStatus struct {
	Addr      string `json:"addr"`
	Voter     bool   `json:"voter"`
	Leader    bool   `json:"leader"`
	Reachable bool   `json:"reachable"`
	LastIndex uint64 `json:"last_index"`
	Lag       uint64 `json:"lag"`
	Error     string `json:"error,omitempty"`
}

type groupStatus struct {
	Shard       string         `json:"shard"`
	Leader      string         `json:"leader"`
	CommitIndex uint64         `json:"commit_index"`
	Members     []memberStatus `json:"members"`
	Error       string         `json:"error,omitempty"`
}

func toGroupStatus(name string, st *shardpb.MembersResponse) groupStatus {
	gs := groupStatus{Shard: name, Leader: st.GetLeader(), CommitIndex: st.GetCommitIndex()}
	for _, m := range st.GetMembers() {
		ms := memberStatus{Addr: m.GetAddr(), Voter: m.GetVoter(), Leader: m.GetLeader(), Reachable: m.GetReachable(),
			LastIndex: m.GetLastIndex(), Error: m.GetError()}
		if m.GetReachable() && st.GetLastIndex() > m.GetLastIndex() {
			ms.Lag = st.GetLastIndex() - m.GetLastIndex()
		}
		gs.Members = append(gs.Members, ms)
	}
	return gs
}

func adminStatus(ctx context.Context, out io.Writer, shards []app.ShardSpec, dial client.DialConfig, asJSON bool) error {
	var all []groupStatus
	failed := 0
	for _, spec := range shards {
		g, err := dialGroup(spec, dial)
		if err != nil {
			return err
		}
		st, err := g.members(ctx, true)
		g.close()
		if err != nil {
			failed++
			all = append(all, groupStatus{Shard: spec.Name, Error: err.Error()})
			continue
		}
		all = append(all, toGroupStatus(spec.Name, st))
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(all); err != nil {
			return err
		}
	} else {
		for _, gs := range all {
			printStatus(out, gs)
		}
	}
	if failed > 0 {
		return fmt.Errorf("admin status: %d of %d shards did not answer", failed, len(shards))
	}
	return nil
}

func printStatus(out io.Writer, gs groupStatus) {
	if gs.Error != "" {
		fmt.Fprintf(out, "%s: %s\n", gs.Shard, gs.Error)
		return
	}
	leader := gs.Leader
	if leader == "" {
		leader = "(none known)"
	}
	fmt.Fprintf(out, "%s  leader %s  commit index %d\n", gs.Shard, leader, gs.CommitIndex)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  REPLICA\tVOTER\tLEADER\tREACHABLE\tLAST INDEX\tLAG\t")
	for _, m := range gs.Members {
		reach, last, lag := "-", "-", "-"
		if m.Reachable {
			reach, last, lag = "yes", fmt.Sprint(m.LastIndex), fmt.Sprint(m.Lag)
		} else if m.Error != "" {
			reach = "no"
		}
		voter := "yes"
		if !m.Voter {
			voter = "no (catching up)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%s\t%s\t%s\t\n", m.Addr, voter, yesNo(m.Leader), reach, last, lag)
	}
	_ = tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
