package raftnode

import (
	"fmt"
	"time"
)

// Raft's timings (Config.HeartbeatTimeout, ElectionTimeout) and their
// bounds; `router shard` takes them as --raft-heartbeat-timeout and
// --raft-election-timeout.
const (
	// DefaultHeartbeatTimeout is how long a follower goes without a word
	// from its leader before it calls an election (raft waits a random
	// 1-2× this); the leader sends heartbeats every tenth of it, and steps
	// down when no majority has answered it for as long (its lease).
	DefaultHeartbeatTimeout = time.Second
	// DefaultElectionTimeout is how long a candidate waits for votes
	// before it starts a new round.
	DefaultElectionTimeout = time.Second
	// MinRaftTimeout and MaxRaftTimeout bound both. Below 100 ms a
	// heartbeat's round trip alone (tens of ms under a bulk load, at the
	// median) uses up the leader's lease and leaders flap; above a minute a
	// dead leader leaves its shard without writes for minutes.
	MinRaftTimeout = 100 * time.Millisecond
	MaxRaftTimeout = time.Minute
)

// CheckTimings refuses raft timings a shard cannot run well with, naming
// the flags they come from: a heartbeat or election timeout outside
// MinRaftTimeout..MaxRaftTimeout, an election timeout under the heartbeat
// timeout (raft itself refuses it), and a leader silence under 3× the
// election timeout (a leader change would stop the shard serving reads).
func CheckTimings(heartbeat, election, maxLeaderSilence time.Duration) error {
	for _, t := range []struct {
		flag string
		d    time.Duration
	}{{"--raft-heartbeat-timeout", heartbeat}, {"--raft-election-timeout", election}} {
		if t.d < MinRaftTimeout || t.d > MaxRaftTimeout {
			return fmt.Errorf("%s %s: want %s..%s", t.flag, t.d, MinRaftTimeout, MaxRaftTimeout)
		}
	}
	if election < heartbeat {
		return fmt.Errorf("--raft-election-timeout %s is under --raft-heartbeat-timeout %s: raft needs the election timeout at least as long", election, heartbeat)
	}
	if maxLeaderSilence < 3*election {
		return fmt.Errorf("--max-leader-silence %s is under 3x --raft-election-timeout %s (%s): a leader change would flap the shard", maxLeaderSilence, election, 3*election)
	}
	return nil
}
