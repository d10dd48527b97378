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
