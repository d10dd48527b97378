package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	s := "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000 10 rest"
	got, err := parseStat(s)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3*time.Second {
		t.Fatalf("cpu %s, want 3s", got)
	}
}

func TestCPUOfSelf(t *testing.T) {
	if _, err := CPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestRunQueueWait(t *testing.T) {
	w, err := parseSchedstat("123456 7890 12\n")
	if err != nil || w != 7890*time.Nanosecond {
		t.Fatalf("parsed %v, %v", w, err)
	}
	if _, err := parseSchedstat("1\n"); err == nil {
		t.Fatal("short schedstat accepted")
	}
	self, err := RunQueueWait(os.Getpid())
	if err != nil || self < 0 {
		t.Fatalf("own run-queue wait %v, %v", self, err)
	}
}
