package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

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

func envName(flagName string) string {
	if flagName == "shard" {
		return "TRAWL_SHARDS"
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
