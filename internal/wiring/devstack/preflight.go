package devstack

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
)

// LockFile is the file of the data directory that `awaken dev` locks while it runs.
const LockFile = "awaken.lock"

// ErrDataDirInUse is matched by a [DataDirInUseError].
var ErrDataDirInUse = errors.New("data directory in use")

// DataDirInUseError: another process holds the data directory's lock.
type DataDirInUseError struct {
	Dir string
	// Holder is what the holder wrote in the lock file ("pid N (awaken dev since T)"), ""
	// when it could not be read.
	Holder string
}

func (e *DataDirInUseError) Error() string {
	who := "another process"
	if e.Holder != "" {
		who = "another awaken dev, " + e.Holder
	}
	return fmt.Sprintf("dev: data directory %s is in use by %s: stop it, or give this one another --data", e.Dir, who)
}

func (e *DataDirInUseError) Unwrap() error { return ErrDataDirInUse }

// ErrAddrInUse is matched by an [AddrInUseError].
var ErrAddrInUse = errors.New("address in use")

// AddrInUseError: an address `awaken dev` must listen on is taken.
type AddrInUseError struct {
	Flag, Addr string
	Err        error
}

func (e *AddrInUseError) Error() string {
	// `make run` passes its variables LISTEN and HTTP as these flags: a person who started
	// it that way picks another address with the variable, not the flag.
	makeVar := strings.ToUpper(strings.TrimPrefix(e.Flag, "--"))
	return fmt.Sprintf("dev: %s %s: address already in use (another awaken dev or nats-server?); pick another with %s HOST:PORT (make run %s=HOST:PORT): %v",
		e.Flag, e.Addr, e.Flag, makeVar, e.Err)
}

func (e *AddrInUseError) Unwrap() []error { return []error{ErrAddrInUse, e.Err} }

// checkListen fails at once when addr cannot be listened on — rather than the embedded
// server failing inside its start and the start timing out without saying why. It
// listens and closes again; a process that takes the address in between is caught by
// [mapServerError].
func checkListen(flag, addr string) error {
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return &AddrInUseError{Flag: flag, Addr: addr, Err: err}
		}
		return fmt.Errorf("dev: %s %s: %w", flag, addr, err)
	}
	return l.Close()
}

// mapServerError explains an embedded server that did not start: most often its address
// was taken after checkListen.
func mapServerError(listen string, err error) error {
	if lerr := checkListen("--listen", listen); lerr != nil {
		return fmt.Errorf("%w (%v)", lerr, err)
	}
	return fmt.Errorf("dev: embedded NATS: %w", err)
}
