package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/api"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
)

// parseFlags parses args, then fills every flag not given on the command
// line from its environment twin: --http-addr from TRAWL_HTTP_ADDR.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of router %s (each flag also read from TRAWL_<FLAG>):\n", fs.Name())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 && fs.Name() != "load" {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, serr)
			}
		}
	})
	return err
}

// pluralEnv are the repeatable flags, whose environment twins hold several
// values separated by ";".
var pluralEnv = map[string]string{
	"shard":             "TRAWL_SHARDS",
	"ensure-collection": "TRAWL_ENSURE_COLLECTIONS",
}

func envName(flagName string) string {
	if env, ok := pluralEnv[flagName]; ok {
		return env
	}
	return "TRAWL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// shardFlag is the repeatable --shard NAME=HOST:PORT[,HOST:PORT...]. Its
// environment twin TRAWL_SHARDS holds several, separated by ";".
type shardFlag []app.ShardSpec

func (s *shardFlag) String() string {
	parts := make([]string, len(*s))
	for i, sp := range *s {
		parts[i] = sp.Name + "=" + strings.Join(sp.Addrs, ",")
	}
	return strings.Join(parts, ";")
}

func (s *shardFlag) Set(v string) error {
	for _, one := range strings.Split(v, ";") {
		one = strings.TrimSpace(one)
		if one == "" {
			continue
		}
		name, addrs, ok := strings.Cut(one, "=")
		if !ok || name == "" || addrs == "" {
			return fmt.Errorf("shard %q: want NAME=HOST:PORT[,HOST:PORT...]", one)
		}
		sp := app.ShardSpec{Name: name}
		for _, a := range strings.Split(addrs, ",") {
			if a = strings.TrimSpace(a); a != "" {
				sp.Addrs = append(sp.Addrs, a)
			}
		}
		*s = append(*s, sp)
	}
	return nil
}

// ensureFlag is the repeatable --ensure-collection
// NAME=DIM:METRIC[:QUANTIZATION[:INDEX[:FLOAT32]]]. Its environment twin
// TRAWL_ENSURE_COLLECTIONS holds several, separated by ";". A name given
// twice must be given with the same settings.
type ensureFlag []catalog.Spec

func (e *ensureFlag) String() string {
	parts := make([]string, len(*e))
	for i, sp := range *e {
		parts[i] = sp.Name + "=" + sp.Settings.String()
	}
	return strings.Join(parts, ";")
}

func (e *ensureFlag) Set(v string) error {
	for _, one := range strings.Split(v, ";") {
		one = strings.TrimSpace(one)
		if one == "" {
			continue
		}
		sp, err := catalog.ParseSpec(one)
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(*e, func(x catalog.Spec) bool { return x.Name == sp.Name }); i >= 0 {
			if !(*e)[i].Settings.Equal(sp.Settings) {
				return fmt.Errorf("collection %q given twice with different settings: %s and %s", sp.Name, (*e)[i].Settings, sp.Settings)
			}
			continue
		}
		*e = append(*e, sp)
	}
	return nil
}

// collectionFlags are serve's flags about collections.
type collectionFlags struct {
	// def is --collection: the collection the collection-less paths use.
	def    *string
	ensure ensureFlag
	max    *int
}

func addCollectionFlags(fs *flag.FlagSet) *collectionFlags {
	c := &collectionFlags{}
	c.def = fs.String("collection", api.DefaultCollection,
		"the default collection: the one the collection-less paths (/v1/search, /v1/vectors, ...) act on")
	fs.Var(&c.ensure, "ensure-collection",
		"create the collection `NAME=DIM:METRIC[:QUANTIZATION[:INDEX[:FLOAT32]]]` at start unless it exists, e.g. docs=768:dot:int8:ivf (repeatable; env TRAWL_ENSURE_COLLECTIONS=\"a=384:cosine;b=1536:l2\"); one existing with other settings is logged and left as it is")
	c.max = fs.Int("max-collections", coordinator.DefaultMaxCollections,
		"most collections the cluster may hold; a create beyond it is refused (it also bounds the collection label of the metrics)")
	return c
}

// check validates the flags once parsed.
func (c *collectionFlags) check() error {
	if err := catalog.ValidName(*c.def); err != nil {
		return fmt.Errorf("--collection: %w", err)
	}
	if *c.max < 1 {
		return fmt.Errorf("--max-collections %d: want at least 1", *c.max)
	}
	if len(c.ensure) > *c.max {
		return fmt.Errorf("--ensure-collection names %d collections, more than --max-collections %d", len(c.ensure), *c.max)
	}
	return nil
}

// logLevelFlag adds --log-level (debug, info, warn or error) to fs.
func logLevelFlag(fs *flag.FlagSet, def slog.Level) *slog.Level {
	l := new(slog.Level)
	fs.TextVar(l, "log-level", def, "least level of the log lines written to stderr: debug, info, warn or error (the raft library's own lines: warn and above, all with debug)")
	return l
}

// raftLogLevel is the least level of the raft library's own lines: its
// INFO lines (elections, heartbeats, snapshots) are chatter unless one
// asks for debug.
func raftLogLevel(l slog.Level) slog.Level {
	if l <= slog.LevelDebug {
		return l
	}
	return max(l, slog.LevelWarn)
}
