//go:build unix

package devstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockDataDir takes the data directory's lock: an exclusive flock on dir/awaken.lock,
// held until release (or the process's end: the kernel drops it with the descriptor, so a
// crash never leaves a stale lock). The file says who holds it, for the next one to tell.
// Two embedded servers on one file store would corrupt it.
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dev: lock the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &DataDirInUseError{Dir: dir, Holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("dev: lock %s: %w", path, err)
	}
	// Written under the lock, so a reader that failed to take it reads a whole line.
	if err := f.Truncate(0); err == nil {
		_, _ = fmt.Fprintf(f, "pid %d (awaken dev since %s)\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	}
	return func() { f.Close() }, nil
}
