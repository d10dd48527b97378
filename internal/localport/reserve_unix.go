//go:build unix

package localport

import (
	"errors"
	"path/filepath"
	"strconv"
	"syscall"
)

// reserve takes port for the rest of the process's life: an exclusive
// flock on dir/<port>. It reports false when another process, or an
// earlier call in this one (a lock belongs to the open file, not the
// process), holds it.
//
// Binding alone cannot reserve: a stopped server has no socket, and while
// it is down another test process running beside it (go test runs
// packages in parallel) picked the same port at random and kept it past
// the restart's wait. The descriptor is deliberately never closed, and
// is closed on exec, so the lock ends exactly when this process does:
// one open file per port handed out.
func reserve(dir string, port int) (bool, error) {
	fd, err := syscall.Open(filepath.Join(dir, strconv.Itoa(port)), syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o666)
	if err != nil {
		return false, err
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		syscall.Close(fd)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
